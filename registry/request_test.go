package registry_test

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry"
)

func tokens(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(1000 + i)
	}
	return out
}

func TestBlockHashesChain(t *testing.T) {
	const bs = 4
	base := registry.BlockHashes(tokens(12), bs)
	require.Len(t, base, 3)
	assert.Equal(t, base, registry.BlockHashes(tokens(12), bs), "hashes are deterministic")

	// Equal prefixes, different last block: only the last hash differs.
	tail := tokens(12)
	tail[11]++
	got := registry.BlockHashes(tail, bs)
	assert.Equal(t, base[:2], got[:2])
	assert.NotEqual(t, base[2], got[2])

	// A change in block 0 changes every later hash, because each covers
	// its parent.
	head := tokens(12)
	head[0]++
	got = registry.BlockHashes(head, bs)
	for i := range got {
		assert.NotEqual(t, base[i], got[i], "block %d", i)
	}

	// The same block content at another position hashes differently.
	repeated := []uint32{1, 2, 3, 4, 1, 2, 3, 4}
	got = registry.BlockHashes(repeated, bs)
	assert.NotEqual(t, got[0], got[1])

	// A trailing partial block has no hash.
	assert.Equal(t, base[:2], registry.BlockHashes(tokens(11), bs))
	assert.Empty(t, registry.BlockHashes(tokens(3), bs))
	assert.Empty(t, registry.BlockHashes(nil, bs))
}

func TestBlockHashesFormat(t *testing.T) {
	// Stored keys depend on the exact hash, so it must not change: the
	// first block's hash is SHA-256 of a zero parent and the tokens in
	// little-endian order, the next one chains on it.
	var buf []byte
	buf = append(buf, make([]byte, sha256.Size)...)
	for _, tok := range []uint32{7, 8} {
		buf = binary.LittleEndian.AppendUint32(buf, tok)
	}
	first := sha256.Sum256(buf)
	buf = append(first[:0:0], first[:]...)
	for _, tok := range []uint32{9, 10} {
		buf = binary.LittleEndian.AppendUint32(buf, tok)
	}
	second := sha256.Sum256(buf)

	got := registry.BlockHashes([]uint32{7, 8, 9, 10}, 2)
	require.Len(t, got, 2)
	assert.Equal(t, registry.BlockHash(first), got[0])
	assert.Equal(t, registry.BlockHash(second), got[1])
	assert.Regexp(t, `^[0-9a-f]{64}$`, got[0].String())
}

func TestBlockHashesPanicsOnBadBlockSize(t *testing.T) {
	assert.PanicsWithValue(t, "registry.BlockHashes: block size 0", func() { registry.BlockHashes(tokens(4), 0) })
	assert.PanicsWithValue(t, "registry.BlockHashes: block size -1", func() { registry.BlockHashes(tokens(4), -1) })
}

func TestPrefixHash(t *testing.T) {
	prompt := tokens(10)
	all := registry.BlockHashes(prompt, 4)
	h, err := registry.PrefixHash(prompt, 4, 8)
	require.NoError(t, err)
	assert.Equal(t, all[1], h)
	h, err = registry.PrefixHash(prompt, 4, 4)
	require.NoError(t, err)
	assert.Equal(t, all[0], h)

	_, err = registry.PrefixHash(prompt, 4, 6)
	assert.EqualError(t, err, "prefix of 6 tokens is not aligned to the block size 4")
	_, err = registry.PrefixHash(prompt, 4, 12)
	assert.EqualError(t, err, "prefix of 12 tokens is longer than the prompt (10 tokens)")
}

func TestCheckPrefix(t *testing.T) {
	assert.NoError(t, registry.CheckPrefix(32, 16, 16))
	assert.NoError(t, registry.CheckPrefix(33, 16, 32))
	assert.EqualError(t, registry.CheckPrefix(32, 0, 16), "block size 0: want a positive number of tokens")
	assert.EqualError(t, registry.CheckPrefix(32, 16, 0), "prefix of 0 tokens: want at least one block of 16")
	assert.EqualError(t, registry.CheckPrefix(32, 16, -16), "prefix of -16 tokens: want at least one block of 16")
	assert.EqualError(t, registry.CheckPrefix(32, 16, 24), "prefix of 24 tokens is not aligned to the block size 16")
	assert.EqualError(t, registry.CheckPrefix(31, 16, 32), "prefix of 32 tokens is longer than the prompt (31 tokens)")
}
