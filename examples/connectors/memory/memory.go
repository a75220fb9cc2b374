// Package memory is a KV connector that keeps KV in the memory of the
// process, bounded by bytes, evicting the least recently used layer first.
//
// Its settings (kv_connector_extra_config) are:
//
//   - capacity_bytes: the most memory the store's layers take, 268435456
//     (256 MiB) by default. A layer counts its KV bytes, its name and a
//     few hundred bytes of bookkeeping, so that many small layers cannot
//     hold more memory than the bound. A layer larger than that cannot be
//     saved. At most 1 TiB.
//   - store: the name of the store, "default" by default. Connectors of one
//     process that name the same store share it; that is how the scheduler
//     side sees what the worker side saved.
//
// KV is keyed by the model (Config.Model) as well as the prompt, so engines
// of several models can share one store without ever seeing each other's KV.
//
// A store lives while a connector uses it: when the last connector naming it
// closes, its KV is dropped. Nothing is shared between processes, so the
// connector suits single-process deployments, tests and benchmarks.
package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/kvgen/kvgen/registry/kv"
)

// DefaultCapacity is the capacity of a store whose settings give none.
const DefaultCapacity = 256 << 20

// DefaultStore is the store connectors use when their settings name none.
const DefaultStore = "default"

// Options are the connector's settings, decoded from
// kv_connector_extra_config.
type Options struct {
	// CapacityBytes is the most memory the store's layers take, each
	// counted with its name and bookkeeping.
	CapacityBytes int64 `json:"capacity_bytes" min:"1" max:"1099511627776"`
	// Store names the store; connectors naming the same one share it.
	Store string `json:"store" min:"1" max:"256"`
}

// errClosed is returned by calls on a closed connector.
var errClosed = errors.New("memory connector is closed")

// New creates a connector that keeps KV in the memory of the process, in a
// store bounded by bytes that evicts the least recently used layer first.
// It serves both roles. Connectors whose settings name the same store share
// it, and must agree on its capacity.
//
//kvgen:constructor
func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	prefixes, err := cfg.Prefixes()
	if err != nil {
		return nil, err
	}
	opts := Options{CapacityBytes: DefaultCapacity, Store: DefaultStore}
	if err := kv.DecodeExtra(cfg.Extra, &opts); err != nil {
		return nil, err
	}
	s, err := acquire(opts.Store, opts.CapacityBytes)
	if err != nil {
		return nil, err
	}
	c := &connector{cfg: cfg, prefixes: prefixes, hashes: prefixes.Cache(), store: s}
	c.group = s.join(prefixes, cfg.LayerNames, &c.emit)
	return c, nil
}

var (
	_ kv.LayerAppender   = (*connector)(nil)
	_ kv.StatsReporter   = (*connector)(nil)
	_ kv.EventReporter   = (*connector)(nil)
	_ kv.RemovalReporter = (*connector)(nil)
)

// connector is one side of a shared store.
type connector struct {
	cfg       kv.Config
	prefixes  kv.Prefixes // keys of this model's prompts
	store     *store
	hashes    *kv.PrefixCache // prefixes, remembering a request's
	closed    atomic.Bool
	closeOnce sync.Once
	stats     kv.StatsRecorder
	emit      kv.EventFunc
	group     *eventGroup // the store's connectors of this model and block size
}

// KVStats returns what the connector counted since KVStats was first
// called: layers loaded, missed and saved, their bytes and latencies.
func (c *connector) KVStats() kv.Stats { return c.stats.Stats() }

// ReportEvents reports, on medium CPU, the blocks of this connector's
// model the store holds: a BlockStored event for the blocks a prefix adds
// when a save completes it (every configured layer stored), and a
// BlockRemoved event for every block no longer held when an eviction
// leaves a prefix with a layer missing. Every connector of the store and
// model that asks for events gets them all, whichever connector's save
// made the change; a prefix is tracked from a save made while one asked.
// Events are reported under the store's lock, in the order of the
// changes.
func (c *connector) ReportEvents(emit func(kv.KVEvent)) { c.emit.Set(emit) }

// ReportsRemovals returns nil: the connector reports every eviction that
// makes a prefix it reported stored unloadable.
func (c *connector) ReportsRemovals() error { return nil }

// Close releases the connector's reference to its store.
func (c *connector) Close() error {
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.store.leave(c.group, &c.emit)
		release(c.store)
	})
	return nil
}

// MatchedTokens returns the longest block-aligned prefix of the prompt
// whose layers are all stored, less numComputed.
func (c *connector) MatchedTokens(ctx context.Context, req *kv.Request, numComputed int) (int, error) {
	if c.closed.Load() {
		return 0, errClosed
	}
	return c.prefixes.Matched(ctx, req, numComputed, func(h kv.BlockHash) (bool, error) {
		return c.store.has(h, c.cfg.LayerNames), nil
	})
}

// AfterAlloc does nothing: loads need no preparation.
func (c *connector) AfterAlloc(ctx context.Context, req *kv.Request, numExternal int) error {
	return nil
}

// RequestFinished does nothing: the connector keeps no state per request.
func (c *connector) RequestFinished(ctx context.Context, req *kv.Request) error {
	return nil
}

// SaveLayer stores a copy of kv, evicting the least recently used layers
// to make room.
func (c *connector) SaveLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, kvData []byte) error {
	if c.closed.Load() {
		return errClosed
	}
	if layer == "" {
		return errors.New("save: empty layer name")
	}
	start := c.stats.Start()
	h, err := c.hashes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		c.stats.Failed(kv.ErrorSave)
		return fmt.Errorf("save layer %s: %w", kv.Quote(layer), err)
	}
	if err := c.store.put(itemKey{h, layer}, slices.Clone(kvData), c.group, req.PromptTokens[:numTokens]); err != nil {
		c.stats.Failed(kv.ErrorSave)
		return err
	}
	c.stats.Saved(start, len(kvData))
	return nil
}

// LoadLayer returns a copy of a stored layer and marks it recently used.
func (c *connector) LoadLayer(ctx context.Context, req *kv.Request, layer string, numTokens int) ([]byte, error) {
	kvData, err := c.AppendLayer(ctx, req, layer, numTokens, nil)
	if err == nil && kvData == nil {
		kvData = []byte{} // a layer of no bytes, stored
	}
	return kvData, err
}

// AppendLayer is LoadLayer copying into dst's spare capacity, growing it
// if it is short.
func (c *connector) AppendLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, dst []byte) ([]byte, error) {
	if c.closed.Load() {
		return dst, errClosed
	}
	start := c.stats.Start()
	h, err := c.hashes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		c.stats.Failed(kv.ErrorLoad)
		return dst, fmt.Errorf("load layer %s: %w", kv.Quote(layer), err)
	}
	kvData, ok := c.store.appendTo(dst, itemKey{h, layer})
	if !ok {
		c.stats.Missed(start)
		return dst, fmt.Errorf("layer %s of a %d-token prefix: %w", kv.Quote(layer), numTokens, kv.ErrMiss)
	}
	c.stats.Loaded(start, len(kvData)-len(dst))
	return kvData, nil
}

// WaitForSave returns at once: saves complete before SaveLayer returns.
func (c *connector) WaitForSave(ctx context.Context) error {
	if c.closed.Load() {
		return errClosed
	}
	return nil
}

// Finished reports every finished request as sent and received, since
// transfers complete synchronously.
func (c *connector) Finished(ctx context.Context, finished []string) (sent, received []string, err error) {
	return slices.Clone(finished), slices.Clone(finished), nil
}
