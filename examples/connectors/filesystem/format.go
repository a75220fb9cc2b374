package filesystem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/kvgen/kvgen/registry"
)

// A layer file is a header followed by the KV bytes. The header, integers
// little-endian:
//
//	offset  size  field
//	0       8     magic "kvgenKV\n"
//	8       4     format version, 1
//	12      8     length of the KV bytes
//	20      32    SHA-256 of the prefix hash and the layer name: whose KV it is
//	52      32    SHA-256 of the KV bytes
//
// Every byte of the header is checked, so a change to any byte of the file
// is caught.
const (
	magic         = "kvgenKV\n"
	formatVersion = 1
	headerLen     = 8 + 4 + 8 + sha256.Size + sha256.Size
)

// newHeader returns the header of the file holding kv for one layer of the
// prefix h.
func newHeader(h registry.BlockHash, layer string, kv []byte) []byte {
	b := make([]byte, 0, headerLen)
	b = append(b, magic...)
	b = binary.LittleEndian.AppendUint32(b, formatVersion)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(kv)))
	key := keyDigest(h, layer)
	b = append(b, key[:]...)
	sum := sha256.Sum256(kv)
	return append(b, sum[:]...)
}

// keyDigest identifies a layer of a prefix, so that a file copied or renamed
// to another place is not taken for that place's KV.
func keyDigest(h registry.BlockHash, layer string) [sha256.Size]byte {
	d := sha256.New()
	d.Write(h[:])
	d.Write([]byte(layer))
	return [sha256.Size]byte(d.Sum(nil))
}

// decode checks data, the contents of a layer file, and returns its KV
// bytes; the error says which check failed.
func decode(data []byte, h registry.BlockHash, layer string) ([]byte, error) {
	if len(data) < headerLen {
		if !bytes.HasPrefix([]byte(magic), data[:min(len(data), len(magic))]) {
			return nil, errors.New("not a kvgen KV file")
		}
		return nil, fmt.Errorf("truncated: %d bytes, shorter than the %d-byte header", len(data), headerLen)
	}
	if string(data[:8]) != magic {
		return nil, errors.New("not a kvgen KV file")
	}
	if v := binary.LittleEndian.Uint32(data[8:]); v != formatVersion {
		return nil, fmt.Errorf("format version %d, want %d", v, formatVersion)
	}
	kv := data[headerLen:]
	switch n := binary.LittleEndian.Uint64(data[12:]); {
	case uint64(len(kv)) < n:
		return nil, fmt.Errorf("truncated: %d of %d bytes of KV", len(kv), n)
	case uint64(len(kv)) > n:
		return nil, fmt.Errorf("%d bytes of KV, %d more than the header says", len(kv), uint64(len(kv))-n)
	}
	if key := keyDigest(h, layer); !bytes.Equal(data[20:52], key[:]) {
		return nil, errors.New("written for another prefix or layer")
	}
	if sum := sha256.Sum256(kv); !bytes.Equal(data[52:headerLen], sum[:]) {
		return nil, errors.New("checksum mismatch: the KV bytes are corrupt")
	}
	return kv, nil
}

// maxNameLen bounds an escaped layer name; with the suffix it stays well
// under the 255 bytes most file systems allow.
const maxNameLen = 200

// fileName returns the name of a layer's file. Bytes other than lower-case
// letters, digits, '-', '_' and a '.' that does not lead become %xx in
// lower-case hex, so any layer name is one plain file name, all in lower
// case so that case-insensitive file systems keep layers apart, and never
// starts with a dot as temporary files do. A name too long is cut and
// completed with the hash of the whole name after a '~', which escaping
// never produces.
func fileName(layer string) string {
	var b strings.Builder
	for i := range len(layer) {
		switch c := layer[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '_', c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02x", c)
		}
	}
	name := b.String()
	if len(name) > maxNameLen {
		sum := sha256.Sum256([]byte(layer))
		name = name[:maxNameLen-1-2*len(sum)] + "~" + hex.EncodeToString(sum[:])
	}
	return name + layerSuffix
}
