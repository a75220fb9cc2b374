package kv

import (
	"encoding/json"
	"fmt"
	"sync/atomic"
)

// EventKind says what a [KVEvent] reports.
type EventKind uint8

// The events a connector reports, named as vLLM names them.
const (
	// BlockStored: the blocks can now be loaded from the connector.
	BlockStored EventKind = iota + 1
	// BlockRemoved: the blocks can no longer be loaded.
	BlockRemoved
	// AllBlocksCleared: no block the connector reported stored can be
	// loaded any more, as after its store was wiped, or when it cannot
	// tell what was removed.
	AllBlocksCleared
)

// String returns vLLM's name of the event.
func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	case AllBlocksCleared:
		return "AllBlocksCleared"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Mediums connectors report their KV in. MediumCPU is vLLM's spelling of
// its CPU tier (the OffloadingConnector's). vLLM and LMCache have no
// medium for a local disk or a Redis shared by engines: MediumDisk and
// MediumRedis name them, and docs/vllm.md says how a router should weigh
// them (below CPU), since a router that does not know a medium may score it
// as GPU.
const (
	MediumCPU   = "CPU"
	MediumDisk  = "DISK"
	MediumRedis = "REDIS"
)

// KVEvent is one of vLLM's KV cache events (vllm/distributed/kv_events.py)
// as a kvgen connector reports it, with vLLM's meaning: replayed in order
// into a set of blocks, the events of a connector give the blocks it holds.
//
// A connector stores KV by prefix, and holds a block while it holds some
// loadable prefix (every layer stored) that contains it; prefixes that
// share leading blocks hold them together ([HeldBlocks] counts them). A
// BlockStored event names the blocks a prefix made held, in order: the
// blocks the prefix adds beyond those already held, which end with the
// prefix's own key. A BlockRemoved event names every block no longer held
// once a prefix stopped being loadable, no more and no fewer: the blocks
// no other held prefix contains. AllBlocksCleared says none is held.
// docs/vllm.md says how a router uses them.
type KVEvent struct {
	Kind EventKind
	// BlockHashes are the chained hashes of the blocks the event names,
	// as [Prefixes.Hashes] computes them, in the prompt's order: the last
	// one is the key of the prefix stored or removed.
	BlockHashes []BlockHash
	// ParentBlockHash is the hash of the block before the first one, or
	// nil when the first block starts the prompt (BlockStored only).
	ParentBlockHash *BlockHash
	// TokenIDs are the prefix's tokens, from the prompt's start through
	// its last block (BlockStored only). The tokens of the blocks named,
	// vLLM's token_ids, are the last len(BlockHashes)*BlockSize of them:
	// [KVEvent.BlockTokenIDs].
	TokenIDs []uint32
	// BlockSize is the number of tokens in a block (BlockStored only).
	BlockSize int
	// Medium is where the KV is: [MediumCPU], [MediumDisk], [MediumRedis].
	Medium string
	// LoraName is the LoRA adapter the KV was computed with; "" for the
	// base model, which is all kvgen's requests know.
	LoraName string
}

// EventReporter is implemented by connectors that report the blocks they
// store and remove, as vLLM's connectors report BlockStored and
// BlockRemoved events, so that a router can send a request to the engine
// that holds its prefix. A connector that implements it should implement
// [RemovalReporter] too, to say whether its events name removals.
type EventReporter interface {
	// ReportEvents makes the connector call emit with each event from now
	// on, from whichever goroutine stored or removed the KV; nil stops the
	// reports. The connector builds no event while none is asked for.
	// emit must return quickly and must not call the connector; the event
	// and its slices are emit's to keep.
	ReportEvents(emit func(KVEvent))
}

// RemovalReporter is implemented by an [EventReporter] that says whether
// its events keep a router's index true.
type RemovalReporter interface {
	// ReportsRemovals returns nil if, while events are reported, the
	// connector reports a BlockRemoved event for every block that stops
	// being loadable (or AllBlocksCleared when it cannot tell which).
	// Otherwise its events are store-only: it never or not always
	// reports removals, an index built from them keeps blocks after they
	// are gone, and the error says why.
	ReportsRemovals() error
}

// BlockTokenIDs returns the tokens of the blocks a BlockStored event
// names, vLLM's token_ids: the last len(BlockHashes)*BlockSize of
// TokenIDs, or all of TokenIDs if they are fewer or the event names no
// block.
func (e KVEvent) BlockTokenIDs() []uint32 {
	n := len(e.BlockHashes) * e.BlockSize
	if len(e.BlockHashes) == 0 || e.BlockSize <= 0 || n > len(e.TokenIDs) {
		return e.TokenIDs
	}
	return e.TokenIDs[len(e.TokenIDs)-n:]
}

// MarshalJSON writes the event with vLLM's field names: "type" is
// BlockStored, BlockRemoved or AllBlocksCleared, hashes are hex strings,
// token_ids are [KVEvent.BlockTokenIDs], and lora_id and lora_name are
// null for the base model. A BlockRemoved event has only block_hashes and
// medium, and AllBlocksCleared only its type, as in vLLM.
func (e KVEvent) MarshalJSON() ([]byte, error) {
	if e.Kind == AllBlocksCleared {
		return json.Marshal(struct {
			Type string `json:"type"`
		}{e.Kind.String()})
	}
	hexes := func(hs []BlockHash) []string {
		out := make([]string, len(hs))
		for i, h := range hs {
			out[i] = h.String()
		}
		return out
	}
	var medium *string
	if e.Medium != "" {
		medium = &e.Medium
	}
	if e.Kind == BlockRemoved {
		return json.Marshal(struct {
			Type        string   `json:"type"`
			BlockHashes []string `json:"block_hashes"`
			Medium      *string  `json:"medium"`
		}{e.Kind.String(), hexes(e.BlockHashes), medium})
	}
	var parent, lora *string
	if e.ParentBlockHash != nil {
		p := e.ParentBlockHash.String()
		parent = &p
	}
	if e.LoraName != "" {
		lora = &e.LoraName
	}
	tokens := e.BlockTokenIDs()
	if tokens == nil {
		tokens = []uint32{}
	}
	return json.Marshal(struct {
		Type            string   `json:"type"`
		BlockHashes     []string `json:"block_hashes"`
		ParentBlockHash *string  `json:"parent_block_hash"`
		TokenIDs        []uint32 `json:"token_ids"`
		BlockSize       int      `json:"block_size"`
		LoraID          *int     `json:"lora_id"`
		Medium          *string  `json:"medium"`
		LoraName        *string  `json:"lora_name"`
	}{e.Kind.String(), hexes(e.BlockHashes), parent, tokens, e.BlockSize, nil, medium, lora})
}

// StoredEvent returns a BlockStored event naming every block of the
// prefix of req's first numTokens tokens, whether or not another prefix
// holds them already.
//
// Deprecated: a router replaying such events counts the leading blocks
// once per prefix. Report what [HeldBlocks.Stored] returns.
func (p Prefixes) StoredEvent(req *Request, numTokens int, medium string) KVEvent {
	tokens := append([]uint32(nil), req.PromptTokens[:numTokens]...)
	return KVEvent{
		Kind:        BlockStored,
		BlockHashes: p.Hashes(tokens),
		TokenIDs:    tokens,
		BlockSize:   p.blockSize,
		Medium:      medium,
	}
}

// RemovedEvent returns a BlockRemoved event naming only the last block of
// the prefix whose hash is h.
//
// Deprecated: a router replaying such events keeps the prefix's leading
// blocks after they are gone. Report what [HeldBlocks.Removed] returns.
func RemovedEvent(h BlockHash, medium string) KVEvent {
	return KVEvent{Kind: BlockRemoved, BlockHashes: []BlockHash{h}, Medium: medium}
}

// EventFunc holds the function an [EventReporter] reports to: a connector
// keeps one, sets it in ReportEvents, and builds an event only when Get
// returns a function. The zero value holds none.
type EventFunc struct{ p atomic.Pointer[func(KVEvent)] }

// Set holds emit, or none for nil.
func (f *EventFunc) Set(emit func(KVEvent)) {
	if emit == nil {
		f.p.Store(nil)
		return
	}
	f.p.Store(&emit)
}

// Get returns the function held, or nil.
func (f *EventFunc) Get() func(KVEvent) {
	if p := f.p.Load(); p != nil {
		return *p
	}
	return nil
}
