package kvevents

import (
	"bytes"
	"fmt"

	"github.com/kvgen/kvgen/registry/kv"
	"github.com/vmihailenco/msgpack/v5"
)

// Encoding says how events are tagged inside a batch. vLLM encodes each
// event as a msgpack map, its tag under "type", since vLLM #42892; before
// it, as an array whose first element is the tag. The batch itself is an
// array in both.
type Encoding int

const (
	// Maps encodes {"type": "BlockStored", "block_hashes": ..., ...}.
	Maps Encoding = iota
	// Arrays encodes ["BlockStored", block_hashes, ...], for routers that
	// read only vLLM's older encoding.
	Arrays
)

// String returns "maps" or "arrays".
func (e Encoding) String() string {
	switch e {
	case Maps:
		return "maps"
	case Arrays:
		return "arrays"
	}
	return fmt.Sprintf("Encoding(%d)", int(e))
}

// ParseEncoding reads "maps" or "arrays".
func ParseEncoding(s string) (Encoding, error) {
	switch s {
	case "maps":
		return Maps, nil
	case "arrays":
		return Arrays, nil
	}
	return 0, fmt.Errorf("kv events encoding %q: want \"maps\" or \"arrays\"", s)
}

// encodeBatch returns vLLM's KVEventBatch: [ts, events, data_parallel_rank].
// Fields vLLM declares without a default are always written, as null when
// kvgen has no value (lora_id, and medium or lora_name when empty); those
// with a default (extra_keys, group_idx, kv_cache_spec_*) are omitted, as
// vLLM's omit_defaults omits them at their defaults.
func encodeBatch(ts float64, events []kv.KVEvent, rank int, enc Encoding) ([]byte, error) {
	size := 32
	for i := range events {
		size += eventSize(&events[i])
	}
	// The payload is kept (for replay, and in subscribers' queues), so it
	// is allocated once at its bound; the encoder is not, so it is reused.
	buf := bytes.NewBuffer(make([]byte, 0, size))
	e := msgpack.GetEncoder()
	defer msgpack.PutEncoder(e)
	e.Reset(buf)
	w := eventWriter{e: e, maps: enc == Maps}
	w.check(e.EncodeArrayLen(3))
	w.check(e.EncodeFloat64(ts))
	w.check(e.EncodeArrayLen(len(events)))
	for i := range events {
		w.event(&events[i])
	}
	w.check(e.EncodeInt(int64(rank)))
	if w.err != nil {
		return nil, w.err
	}
	return buf.Bytes(), nil
}

// eventWriter writes events, keeping the first error.
type eventWriter struct {
	e    *msgpack.Encoder
	maps bool
	err  error
}

func (w *eventWriter) check(err error) {
	if w.err == nil {
		w.err = err
	}
}

// event writes ev as a map tagged under "type", or an array led by its
// tag, with its fields in vLLM's declaration order.
func (w *eventWriter) event(ev *kv.KVEvent) {
	var fields int
	switch ev.Kind {
	case kv.BlockStored:
		fields = 7
	case kv.BlockRemoved:
		fields = 2
	case kv.AllBlocksCleared:
	default:
		w.check(fmt.Errorf("kv events: cannot encode event kind %v", ev.Kind))
		return
	}
	e := w.e
	if w.maps {
		w.check(e.EncodeMapLen(1 + fields))
		w.check(e.EncodeString("type"))
	} else {
		w.check(e.EncodeArrayLen(1 + fields))
	}
	w.check(e.EncodeString(ev.Kind.String()))
	switch ev.Kind {
	case kv.BlockStored:
		w.name("block_hashes")
		w.hashes(ev.BlockHashes)
		w.name("parent_block_hash")
		if ev.ParentBlockHash == nil {
			w.check(e.EncodeNil())
		} else {
			w.check(e.EncodeUint64(ev.ParentBlockHash.Uint64()))
		}
		w.name("token_ids")
		toks := ev.BlockTokenIDs()
		w.check(e.EncodeArrayLen(len(toks)))
		for _, t := range toks {
			w.check(e.EncodeUint(uint64(t)))
		}
		w.name("block_size")
		w.check(e.EncodeInt(int64(ev.BlockSize)))
		w.name("lora_id")
		w.check(e.EncodeNil())
		w.name("medium")
		w.optString(ev.Medium)
		w.name("lora_name")
		w.optString(ev.LoraName)
	case kv.BlockRemoved:
		w.name("block_hashes")
		w.hashes(ev.BlockHashes)
		w.name("medium")
		w.optString(ev.Medium)
	}
}

// name writes a field's name, which only maps carry.
func (w *eventWriter) name(n string) {
	if w.maps {
		w.check(w.e.EncodeString(n))
	}
}

// hashes writes block hashes as msgpack uint64 whatever their value, so
// that a reader typed for 64-bit hashes never meets a narrower integer.
func (w *eventWriter) hashes(hs []kv.BlockHash) {
	w.check(w.e.EncodeArrayLen(len(hs)))
	for _, h := range hs {
		w.check(w.e.EncodeUint64(h.Uint64()))
	}
}

func (w *eventWriter) optString(s string) {
	if s == "" {
		w.check(w.e.EncodeNil())
	} else {
		w.check(w.e.EncodeString(s))
	}
}
