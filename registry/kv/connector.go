package kv

import (
	"context"
	"errors"
)

// Factory creates a connector for one role. It is the signature kvgen checks
// every constructor named in connectors.yaml against. It may run twice in one
// process, once per role, and must not rely on package-level state to tell
// the two apart.
//
// ctx bounds the construction only: dialling, a first handshake, creating
// directories. It may be cancelled as soon as the Factory returns, so a
// connector must not keep it, nor tie background work to it; every method
// of the connector gets the context of its own call, and Close ends what
// outlives the calls. Log through cfg.Logger(), which is the host's logger.
//
// The lines below are data for kvgen: a manifest entry serves the roles
// scheduler and worker, or those its roles: lists, and a constructor whose
// result is a concrete type must implement the interface of each; the
// generated Registry is NewRegistry of the generated table; and a
// --kv-transfer-config (kvgen build -for) selects the entry its
// kv_connector names and, for a [NewMultiConnector], the children its
// extra setting "connectors" lists, each a transfer config of its own
// with the keys ParseTransferConfig knows.
//
//kvgen:roles scheduler=Scheduler worker=Worker
//kvgen:registry NewRegistry
//kvgen:select kv_connector children=kv_connector_extra_config.connectors multi=NewMultiConnector keys=kv_connector,engine_id,kv_buffer_device,kv_buffer_size,kv_role,kv_rank,kv_parallel_size,kv_ip,kv_port,kv_connector_extra_config,kv_connector_module_path,enable_permute_local_kv,kv_load_failure_policy,block_size,layer_names
type Factory func(ctx context.Context, cfg Config, role Role) (Connector, error)

// Connector is what every connector is. The value a Factory returns must also
// implement the interface of the role it was created for: [Scheduler] or
// [Worker].
type Connector interface {
	// Close releases the connector's resources. Calling it more than once
	// is allowed and returns nil after the first call.
	Close() error
}

// Scheduler is the scheduler side of a connector (vLLM's
// KVConnectorBase_V1 scheduler-side methods).
type Scheduler interface {
	Connector
	// MatchedTokens returns how many prompt tokens beyond the first
	// numComputed ones can be loaded from outside. The prefix it promises,
	// numComputed plus the result, is block-aligned and no longer than the
	// prompt; 0 means nothing beyond what is computed.
	MatchedTokens(ctx context.Context, req *Request, numComputed int) (int, error)
	// AfterAlloc tells the connector that blocks were allocated for req and
	// that numExternal tokens will be loaded from outside.
	AfterAlloc(ctx context.Context, req *Request, numExternal int) error
	// RequestFinished tells the connector that req is done; it may release
	// any state it kept for it.
	RequestFinished(ctx context.Context, req *Request) error
}

// Worker is the worker side of a connector (vLLM's KVConnectorBase_V1
// worker-side methods).
type Worker interface {
	Connector
	// SaveLayer stores kv, one layer's KV for the first numTokens tokens of
	// the request's prompt. numTokens is a positive multiple of the block
	// size (see [CheckPrefix]). The connector must not keep kv after
	// returning; it may finish the save in the background until WaitForSave.
	SaveLayer(ctx context.Context, req *Request, layer string, numTokens int, kv []byte) error
	// LoadLayer returns one layer's KV for the first numTokens prompt
	// tokens, exactly as it was saved. If it is not stored, or cannot be
	// trusted, the error wraps [ErrMiss]: wrong data is never returned.
	// The returned slice is the caller's own: the connector keeps no
	// reference to it, and changing it changes nothing stored (the
	// conformance suite checks both).
	LoadLayer(ctx context.Context, req *Request, layer string, numTokens int) ([]byte, error)
	// WaitForSave blocks until every save started so far is stored.
	WaitForSave(ctx context.Context) error
	// Finished reports which of the given finished requests have completed
	// their asynchronous sends and receives, so the engine can free their
	// blocks. Connectors that transfer synchronously return the requests
	// as both.
	Finished(ctx context.Context, finished []string) (sent, received []string, err error)
}

// ErrMiss is wrapped by errors of LoadLayer for KV that is not stored, was
// evicted, or failed its integrity check.
var ErrMiss = errors.New("kv not stored")
