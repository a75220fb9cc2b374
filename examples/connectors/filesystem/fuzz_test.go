package filesystem

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// fuzzPerToken is max_bytes_per_token in FuzzLayerFile: a load of one block
// may then take fuzzPerToken*bs bytes.
const fuzzPerToken = 32 << 10

// FuzzLayerFile loads any bytes as a layer file, followed by a hole of up
// to four times the load's bound (a sparse file). No input panics; a load
// allocates at most its bound for the KV and a read buffer no larger
// (plus a fixed overhead), whatever the header claims; and what a load
// returns is exactly the bytes after a header that a reader written here,
// apart from the connector's, finds valid. Anything else is a miss.
func FuzzLayerFile(f *testing.F) {
	dir := f.TempDir()
	c, err := New(f.Context(), kv.Config{BlockSize: bs, Extra: map[string]any{
		"shared_storage_path": dir, "max_bytes_per_token": fuzzPerToken,
	}}, kv.RoleWorker)
	require.NoError(f, err)
	f.Cleanup(func() { c.Close() })
	c.Logger = slog.New(slog.DiscardHandler) // a warning an input
	h := mustHash(f)
	path := filepath.Join(dir, h.String(), fileName(layers[0]))
	bound := int64(fuzzPerToken * bs)

	// Seeds: a valid file, the same damaged, and files whose headers claim
	// more than the bound, the last all zeros with their CRC-32 over a hole.
	require.NoError(f, c.SaveLayer(f.Context(), req, layers[0], bs, []byte("kv of four tokens")))
	valid, err := os.ReadFile(path)
	require.NoError(f, err)
	f.Add(valid, uint32(0))
	f.Add(valid[:headerLen], uint32(0))
	f.Add(append(bytes.Clone(valid[:len(valid)-1]), valid[len(valid)-1]^1), uint32(0))
	f.Add([]byte("kvgenKV\n"), uint32(0))
	over := bytes.Clone(valid[:headerLen])
	binary.LittleEndian.PutUint64(over[12:], uint64(bound+1))
	f.Add(over, uint32(bound+1))
	zeros := bytes.Clone(over)
	binary.LittleEndian.PutUint64(zeros[12:], uint64(3*bound))
	binary.LittleEndian.PutUint32(zeros[52:], crc32.ChecksumIEEE(make([]byte, 3*bound)))
	f.Add(zeros, uint32(3*bound))
	fits := bytes.Clone(over)
	binary.LittleEndian.PutUint64(fits[12:], uint64(bound))
	binary.LittleEndian.PutUint32(fits[52:], crc32.ChecksumIEEE(make([]byte, bound)))
	f.Add(fits, uint32(bound))

	f.Fuzz(func(t *testing.T, data []byte, hole uint32) {
		require.NoError(t, os.WriteFile(path, data, 0o644))
		if hole > 0 {
			require.NoError(t, os.Truncate(path, int64(len(data))+int64(hole)%(4*bound+1)))
		}
		file, err := os.ReadFile(path)
		require.NoError(t, err)

		before := totalAlloc()
		kvData, err := c.AppendLayer(t.Context(), req, layers[0], bs, nil)
		allocated := totalAlloc() - before
		assert.LessOrEqual(t, allocated, uint64(2*bound+64<<10), "a load of a %d-byte file allocated %d bytes", len(file), allocated)
		want, ok := validKV(file, h, layers[0], bound)
		if !ok {
			require.ErrorIs(t, err, kv.ErrMiss)
			assert.Empty(t, kvData)
			return
		}
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, kvData), "a load returned other bytes than the file's KV")
	})
}

// validKV decodes a layer file of the layer of prefix h as the format's
// comment describes it, apart from the connector's code, and returns its
// KV if every check passes and it holds at most bound bytes.
func validKV(file []byte, h kv.BlockHash, layer string, bound int64) ([]byte, bool) {
	if len(file) < 56 || string(file[:8]) != "kvgenKV\n" || binary.LittleEndian.Uint32(file[8:]) != 2 {
		return nil, false
	}
	kvData := file[56:]
	key := sha256.Sum256(append(bytes.Clone(h[:]), layer...))
	ok := binary.LittleEndian.Uint64(file[12:]) == uint64(len(kvData)) &&
		bytes.Equal(file[20:52], key[:]) &&
		binary.LittleEndian.Uint32(file[52:]) == crc32.ChecksumIEEE(kvData) &&
		int64(len(kvData)) <= bound
	return kvData, ok
}
