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
)

// String returns vLLM's name of the event.
func (k EventKind) String() string {
	switch k {
	case BlockStored:
		return "BlockStored"
	case BlockRemoved:
		return "BlockRemoved"
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Mediums connectors report their KV in, in vLLM's spelling where vLLM has
// one.
const (
	MediumCPU   = "CPU"
	MediumDisk  = "DISK"
	MediumRedis = "REDIS"
)

// KVEvent is one of vLLM's KV cache events (vllm/distributed/kv_events.py)
// as a kvgen connector reports it. A connector stores KV by prefix: a
// BlockStored event is a prefix of a prompt that became loadable, every
// layer of it stored, and lists the hashes of all its blocks; a
// BlockRemoved event is a prefix that stopped being loadable, named by its
// last block's hash, since its leading blocks may still be held as part of
// other prefixes. docs/vllm.md says how a router uses them.
type KVEvent struct {
	Kind EventKind
	// BlockHashes are the chained hashes of the blocks, as
	// [Prefixes.Hashes] computes them: the last one is the prefix's key.
	BlockHashes []BlockHash
	// ParentBlockHash is the hash of the block before the first one, or
	// nil when the first block starts the prompt, as it always does for a
	// stored prefix.
	ParentBlockHash *BlockHash
	// TokenIDs are the prefix's tokens (BlockStored only).
	TokenIDs []uint32
	// BlockSize is the number of tokens in a block (BlockStored only).
	BlockSize int
	// Medium is where the KV is: [MediumCPU], [MediumDisk], [MediumRedis].
	Medium string
	// LoraName is the LoRA adapter the KV was computed with; "" for the
	// base model, which is all kvgen's requests know.
	LoraName string
}

// EventReporter is implemented by connectors that report the prefixes
// they store and remove, as vLLM's connectors report BlockStored and
// BlockRemoved events, so that a router can send a request to the engine
// that holds its prefix.
type EventReporter interface {
	// ReportEvents makes the connector call emit with each event from now
	// on, from whichever goroutine stored or removed the KV; nil stops the
	// reports. The connector builds no event while none is asked for.
	// emit must return quickly and must not call the connector; the event
	// and its slices are emit's to keep.
	ReportEvents(emit func(KVEvent))
}

// MarshalJSON writes the event with vLLM's field names: "type" is
// BlockStored or BlockRemoved, hashes are hex strings, and lora_name is
// null for the base model. A BlockRemoved event has only block_hashes and
// medium, as in vLLM.
func (e KVEvent) MarshalJSON() ([]byte, error) {
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
	tokens := e.TokenIDs
	if tokens == nil {
		tokens = []uint32{}
	}
	return json.Marshal(struct {
		Type            string   `json:"type"`
		BlockHashes     []string `json:"block_hashes"`
		ParentBlockHash *string  `json:"parent_block_hash"`
		TokenIDs        []uint32 `json:"token_ids"`
		BlockSize       int      `json:"block_size"`
		Medium          *string  `json:"medium"`
		LoraName        *string  `json:"lora_name"`
	}{e.Kind.String(), hexes(e.BlockHashes), parent, tokens, e.BlockSize, medium, lora})
}

// StoredEvent returns the BlockStored event of the prefix of req's first
// numTokens tokens, for a connector to report once every layer of it is
// stored.
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

// RemovedEvent returns the BlockRemoved event of the prefix whose hash is h.
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
