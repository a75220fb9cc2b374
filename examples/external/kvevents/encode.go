package kvevents

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/kvgen/kvgen/registry/kv"
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
//
// It appends msgpack by hand, each value in its shortest form as
// msgpack's encoders write it (block hashes excepted: always uint64);
// a batch is encoded on the publisher's one goroutine, in a few hundred
// nanoseconds rather than the microseconds a generic encoder takes.
func encodeBatch(ts float64, events []kv.KVEvent, rank int, enc Encoding) ([]byte, error) {
	size := 16
	for i := range events {
		size += 128 + 9*len(events[i].BlockHashes) + 5*len(events[i].BlockTokenIDs())
	}
	b := make([]byte, 0, size)
	b = appendArrayLen(b, 3)
	b = binary.BigEndian.AppendUint64(append(b, 0xcb), math.Float64bits(ts))
	b = appendArrayLen(b, len(events))
	for i := range events {
		var err error
		if b, err = appendEvent(b, &events[i], enc); err != nil {
			return nil, err
		}
	}
	return appendInt(b, int64(rank)), nil
}

func appendEvent(b []byte, ev *kv.KVEvent, enc Encoding) ([]byte, error) {
	n := 0 // fields after the tag
	switch ev.Kind {
	case kv.BlockStored:
		n = 7
	case kv.BlockRemoved:
		n = 2
	case kv.AllBlocksCleared:
	default:
		return nil, fmt.Errorf("kv events: cannot encode event kind %v", ev.Kind)
	}
	maps := enc != Arrays
	name := func(b []byte, s string) []byte {
		if maps {
			return appendString(b, s)
		}
		return b
	}
	if maps {
		b = appendString(appendMapLen(b, 1+n), "type")
	} else {
		b = appendArrayLen(b, 1+n)
	}
	b = appendString(b, ev.Kind.String())
	switch ev.Kind {
	case kv.BlockStored:
		b = appendHashes(name(b, "block_hashes"), ev.BlockHashes)
		b = name(b, "parent_block_hash")
		if ev.ParentBlockHash == nil {
			b = append(b, 0xc0)
		} else {
			b = appendUint64(b, ev.ParentBlockHash.Uint64())
		}
		toks := ev.BlockTokenIDs()
		b = appendArrayLen(name(b, "token_ids"), len(toks))
		for _, t := range toks {
			b = appendUint(b, uint64(t))
		}
		b = appendInt(name(b, "block_size"), int64(ev.BlockSize))
		b = append(name(b, "lora_id"), 0xc0)
		b = appendOptString(name(b, "medium"), ev.Medium)
		b = appendOptString(name(b, "lora_name"), ev.LoraName)
	case kv.BlockRemoved:
		b = appendHashes(name(b, "block_hashes"), ev.BlockHashes)
		b = appendOptString(name(b, "medium"), ev.Medium)
	}
	return b, nil
}

// appendHashes writes block hashes as msgpack uint64 whatever their
// value, so that a reader typed for 64-bit hashes never meets a narrower
// integer.
func appendHashes(b []byte, hs []kv.BlockHash) []byte {
	b = appendArrayLen(b, len(hs))
	for _, h := range hs {
		b = appendUint64(b, h.Uint64())
	}
	return b
}

func appendUint64(b []byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64(append(b, 0xcf), n)
}

// appendUint writes n in the shortest of positive fixint, uint8, uint16,
// uint32 and uint64.
func appendUint(b []byte, n uint64) []byte {
	switch {
	case n <= math.MaxInt8:
		return append(b, byte(n))
	case n <= math.MaxUint8:
		return append(b, 0xcc, byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, 0xcd), uint16(n))
	case n <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, 0xce), uint32(n))
	}
	return appendUint64(b, n)
}

// appendInt writes n as appendUint does when it is not negative, else in
// the shortest of negative fixint, int8, int16, int32 and int64.
func appendInt(b []byte, n int64) []byte {
	switch {
	case n >= 0:
		return appendUint(b, uint64(n))
	case n >= -32:
		return append(b, byte(n))
	case n >= math.MinInt8:
		return append(b, 0xd0, byte(n))
	case n >= math.MinInt16:
		return binary.BigEndian.AppendUint16(append(b, 0xd1), uint16(n))
	case n >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, 0xd2), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, 0xd3), uint64(n))
}

func appendString(b []byte, s string) []byte {
	switch n := len(s); {
	case n < 32:
		b = append(b, 0xa0|byte(n))
	case n <= math.MaxUint8:
		b = append(b, 0xd9, byte(n))
	case n <= math.MaxUint16:
		b = binary.BigEndian.AppendUint16(append(b, 0xda), uint16(n))
	default:
		b = binary.BigEndian.AppendUint32(append(b, 0xdb), uint32(n))
	}
	return append(b, s...)
}

// appendOptString writes s, or null when it is empty.
func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, 0xc0)
	}
	return appendString(b, s)
}

func appendArrayLen(b []byte, n int) []byte {
	return appendLen(b, n, 0x90, 0xdc)
}

func appendMapLen(b []byte, n int) []byte {
	return appendLen(b, n, 0x80, 0xde)
}

// appendLen writes an array's or map's length: fix (under 16), 16 or 32
// bits; code32 is code16+1.
func appendLen(b []byte, n int, fix, code16 byte) []byte {
	switch {
	case n < 16:
		return append(b, fix|byte(n))
	case n <= math.MaxUint16:
		return binary.BigEndian.AppendUint16(append(b, code16), uint16(n))
	}
	return binary.BigEndian.AppendUint32(append(b, code16+1), uint32(n))
}
