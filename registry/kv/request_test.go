package kv_test

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

func tokens(n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = uint32(1000 + i)
	}
	return out
}

func prefixes(t testing.TB, model string, blockSize int) kv.Prefixes {
	t.Helper()
	p, err := kv.NewPrefixes(model, blockSize)
	require.NoError(t, err)
	return p
}

func TestHashesChain(t *testing.T) {
	p := prefixes(t, "", 4)
	base := p.Hashes(tokens(12))
	require.Len(t, base, 3)
	assert.Equal(t, base, p.Hashes(tokens(12)), "hashes are deterministic")

	// Equal prefixes, different last block: only the last hash differs.
	tail := tokens(12)
	tail[11]++
	got := p.Hashes(tail)
	assert.Equal(t, base[:2], got[:2])
	assert.NotEqual(t, base[2], got[2])

	// A change in block 0 changes every later hash, because each covers
	// its parent.
	head := tokens(12)
	head[0]++
	got = p.Hashes(head)
	for i := range got {
		assert.NotEqual(t, base[i], got[i], "block %d", i)
	}

	// The same block content at another position hashes differently.
	repeated := []uint32{1, 2, 3, 4, 1, 2, 3, 4}
	got = p.Hashes(repeated)
	assert.NotEqual(t, got[0], got[1])

	// A trailing partial block has no hash.
	assert.Equal(t, base[:2], p.Hashes(tokens(11)))
	assert.Empty(t, p.Hashes(tokens(3)))
	assert.Empty(t, p.Hashes(nil))
	assert.Empty(t, kv.Prefixes{}.Hashes(tokens(8)), "the zero value hashes nothing")
}

func TestHashesFormat(t *testing.T) {
	// Stored keys depend on the exact hash, so it must not change: without
	// a model, the first block's hash is SHA-256 of a zero parent and the
	// tokens in little-endian order, the next one chains on it.
	chain := func(parent [sha256.Size]byte, toks ...uint32) [sha256.Size]byte {
		buf := append([]byte(nil), parent[:]...)
		for _, tok := range toks {
			buf = binary.LittleEndian.AppendUint32(buf, tok)
		}
		return sha256.Sum256(buf)
	}
	first := chain([sha256.Size]byte{}, 7, 8)
	second := chain(first, 9, 10)
	got := prefixes(t, "", 2).Hashes([]uint32{7, 8, 9, 10})
	require.Len(t, got, 2)
	assert.Equal(t, kv.BlockHash(first), got[0])
	assert.Equal(t, kv.BlockHash(second), got[1])
	assert.Regexp(t, `^[0-9a-f]{64}$`, got[0].String())

	// With a model, the chain starts from a hash of the model's name.
	seed := sha256.Sum256([]byte("kvgen model\x00org/model-7b"))
	got = prefixes(t, "org/model-7b", 2).Hashes([]uint32{7, 8, 9, 10})
	assert.Equal(t, kv.BlockHash(chain(seed, 7, 8)), got[0])
	assert.Equal(t, kv.BlockHash(chain(chain(seed, 7, 8), 9, 10)), got[1])

	// Blocks longer than the internal buffer hash the same as in one piece.
	long := tokens(3000)
	var want [sha256.Size]byte
	want = chain(want, long[:1500]...)
	want = chain(want, long[1500:]...)
	got = prefixes(t, "", 1500).Hashes(long)
	require.Len(t, got, 2)
	assert.Equal(t, kv.BlockHash(want), got[1])
}

func TestHashesKeepModelsApart(t *testing.T) {
	prompt := tokens(64)
	a := prefixes(t, "org/model-a", 16).Hashes(prompt)
	b := prefixes(t, "org/model-b", 16).Hashes(prompt)
	none := prefixes(t, "", 16).Hashes(prompt)
	for i := range a {
		assert.NotEqual(t, a[i], b[i], "block %d", i)
		assert.NotEqual(t, a[i], none[i], "block %d", i)
	}
	assert.Equal(t, a, prefixes(t, "org/model-a", 16).Hashes(prompt), "one model, one set of keys")
}

func TestNewPrefixesRejectsBlockSizes(t *testing.T) {
	for _, bs := range []int{0, -1, kv.MaxBlockSize + 1, 1 << 30} {
		_, err := kv.NewPrefixes("m", bs)
		assert.EqualError(t, err, fmt.Sprintf("block size %d: want a number of tokens from 1 to 65536", bs))
		_, err = kv.Config{BlockSize: bs}.Prefixes()
		assert.Error(t, err)
	}
	p := prefixes(t, "m", kv.MaxBlockSize)
	assert.Equal(t, kv.MaxBlockSize, p.BlockSize())
	assert.Empty(t, p.Hashes(tokens(100)), "a prompt shorter than a block has no hash")
}

func TestHashAllocatesNothingForShortPrompts(t *testing.T) {
	// The hashing buffer does not grow with the block size: a huge block
	// and a short prompt cost nothing.
	p := prefixes(t, "m", kv.MaxBlockSize)
	prompt := tokens(100)
	allocs := testing.AllocsPerRun(10, func() { _ = p.Hashes(prompt) })
	assert.Zero(t, allocs)

	// A prompt of one huge block: the result and the hash state, no
	// buffer of the block's size.
	one := tokens(kv.MaxBlockSize)
	allocs = testing.AllocsPerRun(10, func() { _ = p.Hashes(one) })
	assert.LessOrEqual(t, allocs, 2.0)
}

func TestHash(t *testing.T) {
	p := prefixes(t, "", 4)
	prompt := tokens(10)
	all := p.Hashes(prompt)
	h, err := p.Hash(prompt, 8)
	require.NoError(t, err)
	assert.Equal(t, all[1], h)
	h, err = p.Hash(prompt, 4)
	require.NoError(t, err)
	assert.Equal(t, all[0], h)

	_, err = p.Hash(prompt, 6)
	assert.EqualError(t, err, "prefix of 6 tokens is not aligned to the block size 4")
	_, err = p.Hash(prompt, 12)
	assert.EqualError(t, err, "prefix of 12 tokens is longer than the prompt (10 tokens)")
	_, err = kv.Prefixes{}.Hash(prompt, 4)
	assert.EqualError(t, err, "block size 0: want a number of tokens from 1 to 65536")
}

func TestMatched(t *testing.T) {
	p := prefixes(t, "m", 4)
	req := &kv.Request{ID: "r", PromptTokens: tokens(14)}
	all := p.Hashes(req.PromptTokens)
	held := map[kv.BlockHash]bool{all[0]: true, all[1]: true}
	stored := func(h kv.BlockHash) (bool, error) { return held[h], nil }
	n, err := p.Matched(t.Context(), req, 0, stored)
	require.NoError(t, err)
	assert.Equal(t, 8, n)
	n, err = p.Matched(t.Context(), req, 4, stored)
	require.NoError(t, err)
	assert.Equal(t, 4, n)
	n, err = p.Matched(t.Context(), req, 8, stored)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = p.Matched(t.Context(), req, -1, stored)
	assert.EqualError(t, err, "-1 computed tokens: want zero or more")
}

func TestCheckPrefix(t *testing.T) {
	assert.NoError(t, kv.CheckPrefix(32, 16, 16))
	assert.NoError(t, kv.CheckPrefix(33, 16, 32))
	assert.EqualError(t, kv.CheckPrefix(32, 0, 16), "block size 0: want a number of tokens from 1 to 65536")
	assert.EqualError(t, kv.CheckPrefix(1<<30, 1<<29, 1<<29), "block size 536870912: want a number of tokens from 1 to 65536")
	assert.EqualError(t, kv.CheckPrefix(32, 16, 0), "prefix of 0 tokens: want at least one block of 16")
	assert.EqualError(t, kv.CheckPrefix(32, 16, -16), "prefix of -16 tokens: want at least one block of 16")
	assert.EqualError(t, kv.CheckPrefix(32, 16, 24), "prefix of 24 tokens is not aligned to the block size 16")
	assert.EqualError(t, kv.CheckPrefix(31, 16, 32), "prefix of 32 tokens is longer than the prompt (31 tokens)")
}
