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

// field is one named value of an event, in vLLM's declaration order.
type field struct {
	name  string
	value func(*msgpack.Encoder) error
}

// encodeBatch returns vLLM's KVEventBatch: [ts, events, data_parallel_rank].
// Fields vLLM declares without a default are always written, as null when
// kvgen has no value (lora_id, and medium or lora_name when empty); those
// with a default (extra_keys, group_idx, kv_cache_spec_*) are omitted, as
// vLLM's omit_defaults omits them at their defaults.
func encodeBatch(ts float64, events []kv.KVEvent, rank int, enc Encoding) ([]byte, error) {
	var buf bytes.Buffer
	e := msgpack.NewEncoder(&buf)
	if err := e.EncodeArrayLen(3); err != nil {
		return nil, err
	}
	if err := e.EncodeFloat64(ts); err != nil {
		return nil, err
	}
	if err := e.EncodeArrayLen(len(events)); err != nil {
		return nil, err
	}
	for i := range events {
		if err := encodeEvent(e, &events[i], enc); err != nil {
			return nil, err
		}
	}
	if err := e.EncodeInt(int64(rank)); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func encodeEvent(e *msgpack.Encoder, ev *kv.KVEvent, enc Encoding) error {
	var fields []field
	switch ev.Kind {
	case kv.BlockStored:
		fields = []field{
			{"block_hashes", hashes(ev.BlockHashes)},
			{"parent_block_hash", func(e *msgpack.Encoder) error {
				if ev.ParentBlockHash == nil {
					return e.EncodeNil()
				}
				return e.EncodeUint64(ev.ParentBlockHash.Uint64())
			}},
			{"token_ids", func(e *msgpack.Encoder) error {
				toks := ev.BlockTokenIDs()
				if err := e.EncodeArrayLen(len(toks)); err != nil {
					return err
				}
				for _, t := range toks {
					if err := e.EncodeUint(uint64(t)); err != nil {
						return err
					}
				}
				return nil
			}},
			{"block_size", func(e *msgpack.Encoder) error { return e.EncodeInt(int64(ev.BlockSize)) }},
			{"lora_id", func(e *msgpack.Encoder) error { return e.EncodeNil() }},
			{"medium", optString(ev.Medium)},
			{"lora_name", optString(ev.LoraName)},
		}
	case kv.BlockRemoved:
		fields = []field{
			{"block_hashes", hashes(ev.BlockHashes)},
			{"medium", optString(ev.Medium)},
		}
	case kv.AllBlocksCleared:
	default:
		return fmt.Errorf("kv events: cannot encode event kind %v", ev.Kind)
	}
	tag := ev.Kind.String()
	if enc == Arrays {
		if err := e.EncodeArrayLen(1 + len(fields)); err != nil {
			return err
		}
		if err := e.EncodeString(tag); err != nil {
			return err
		}
		for _, f := range fields {
			if err := f.value(e); err != nil {
				return err
			}
		}
		return nil
	}
	if err := e.EncodeMapLen(1 + len(fields)); err != nil {
		return err
	}
	if err := e.EncodeString("type"); err != nil {
		return err
	}
	if err := e.EncodeString(tag); err != nil {
		return err
	}
	for _, f := range fields {
		if err := e.EncodeString(f.name); err != nil {
			return err
		}
		if err := f.value(e); err != nil {
			return err
		}
	}
	return nil
}

// hashes writes block hashes as msgpack uint64 whatever their value, so
// that a reader typed for 64-bit hashes never meets a narrower integer.
func hashes(hs []kv.BlockHash) func(*msgpack.Encoder) error {
	return func(e *msgpack.Encoder) error {
		if err := e.EncodeArrayLen(len(hs)); err != nil {
			return err
		}
		for _, h := range hs {
			if err := e.EncodeUint64(h.Uint64()); err != nil {
				return err
			}
		}
		return nil
	}
}

func optString(s string) func(*msgpack.Encoder) error {
	return func(e *msgpack.Encoder) error {
		if s == "" {
			return e.EncodeNil()
		}
		return e.EncodeString(s)
	}
}
