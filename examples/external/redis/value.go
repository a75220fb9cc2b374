package redis

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"

	"github.com/kvgen/kvgen/registry/kv"
)

// A stored value is a header followed by the KV bytes:
//
//	magic    4 bytes  "KVG" and format version 1
//	checksum 4 bytes  CRC-32C of everything after it
//	prefix  32 bytes  the prefix hash the value was saved for
//	layer    4 bytes  length of the layer name, then the name
//	kv       8 bytes  length of the KV bytes, then the bytes
//
// The checksum catches truncated and damaged values; the prefix hash and
// layer name catch a value that is intact but under the wrong key. Either
// way a load reports a miss, never someone else's KV. CRC-32C rather than a
// cryptographic hash: it guards against accidents, not against writers with
// access to the server, and it keeps up with multi-megabyte layers.
const valueMagic = "KVG\x01"

const fixedHeaderLen = len(valueMagic) + 4 + len(kv.BlockHash{}) + 4 + 8

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// encodeValue appends the stored form of kv, saved for layer of the prefix
// with hash h, to v, which is usually empty with room to spare.
func encodeValue(v []byte, h kv.BlockHash, layer string, kvData []byte) []byte {
	base := len(v)
	v = slices.Grow(v, fixedHeaderLen+len(layer)+len(kvData))
	v = append(v, valueMagic...)
	v = append(v, 0, 0, 0, 0) // checksum, filled in below
	v = append(v, h[:]...)
	v = binary.BigEndian.AppendUint32(v, uint32(len(layer)))
	v = append(v, layer...)
	v = binary.BigEndian.AppendUint64(v, uint64(len(kvData)))
	v = append(v, kvData...)
	binary.BigEndian.PutUint32(v[base+4:base+8], crc32.Checksum(v[base+8:], castagnoli))
	return v
}

// Why decodeValue rejects a value.
var (
	errForeign  = errors.New("not a value this connector wrote")
	errChecksum = errors.New("checksum mismatch")
	errMisfiled = errors.New("value belongs to another key")
)

// decodeValue checks v, read from the key of layer of the prefix with hash
// h, and returns its KV bytes, which share v's memory.
func decodeValue(v []byte, h kv.BlockHash, layer string) ([]byte, error) {
	if len(v) < fixedHeaderLen || !bytes.HasPrefix(v, []byte(valueMagic)) {
		return nil, errForeign
	}
	if binary.BigEndian.Uint32(v[4:8]) != crc32.Checksum(v[8:], castagnoli) {
		return nil, errChecksum
	}
	rest := v[8:]
	if !bytes.Equal(rest[:len(h)], h[:]) {
		return nil, fmt.Errorf("%w: saved for another prefix", errMisfiled)
	}
	rest = rest[len(h):]
	n := uint64(binary.BigEndian.Uint32(rest))
	rest = rest[4:]
	if n > uint64(len(rest)) || string(rest[:n]) != layer {
		return nil, fmt.Errorf("%w: saved for another layer", errMisfiled)
	}
	rest = rest[n:]
	if len(rest) < 8 {
		return nil, errForeign
	}
	if m := binary.BigEndian.Uint64(rest); m != uint64(len(rest)-8) {
		return nil, fmt.Errorf("%w: header says %d bytes of KV, value holds %d", errForeign, m, len(rest)-8)
	}
	return rest[8:], nil
}
