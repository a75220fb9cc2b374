package kv_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// replay applies events to an index of blocks as a router does, failing
// on an event that contradicts it.
func replay(t *testing.T, index map[kv.BlockHash]bool, events []kv.KVEvent) {
	t.Helper()
	for _, e := range events {
		switch e.Kind {
		case kv.BlockStored:
			if e.ParentBlockHash != nil {
				assert.True(t, index[*e.ParentBlockHash], "parent %s is held", e.ParentBlockHash)
			}
			assert.Len(t, e.BlockTokenIDs(), len(e.BlockHashes)*e.BlockSize, "token_ids are blocks × block size")
			for _, h := range e.BlockHashes {
				assert.False(t, index[h], "block %s stored while held", h)
				index[h] = true
			}
		case kv.BlockRemoved:
			for _, h := range e.BlockHashes {
				assert.True(t, index[h], "block %s removed while not held", h)
				delete(index, h)
			}
		case kv.AllBlocksCleared:
			clear(index)
		}
	}
}

// Prefixes that share blocks hold them together: a store names only the
// blocks it adds, chained to the block before them, and a removal names
// exactly the blocks no other prefix holds.
func TestHeldBlocksCountsSharedBlocks(t *testing.T) {
	p, err := kv.NewPrefixes("m", 2)
	require.NoError(t, err)
	a := []uint32{1, 2, 3, 4, 5, 6}
	b := []uint32{1, 2, 3, 4, 9, 9, 8, 8}
	ha, hb := p.Hashes(a), p.Hashes(b)
	held := p.HeldBlocks()
	var events []kv.KVEvent
	emit := func(e kv.KVEvent) { events = append(events, e) }
	index := map[kv.BlockHash]bool{}
	take := func() []kv.KVEvent {
		e := events
		events = nil
		replay(t, index, e)
		return e
	}

	held.Stored(a, kv.MediumCPU, emit)
	require.Len(t, take(), 1)
	held.Stored(b, kv.MediumCPU, emit)
	e := take()
	require.Len(t, e, 1)
	assert.Equal(t, hb[2:], e[0].BlockHashes, "only the blocks b adds")
	assert.Equal(t, &hb[1], e[0].ParentBlockHash, "chained to the last shared block")
	assert.Equal(t, b[4:], e[0].BlockTokenIDs())

	held.Stored(a[:4], kv.MediumCPU, emit)
	assert.Empty(t, take(), "a prefix whose blocks are all held adds none")
	held.Stored(a, kv.MediumCPU, emit)
	assert.Empty(t, take(), "a prefix held already")

	held.Removed(ha[2], kv.MediumCPU, emit)
	e = take()
	require.Len(t, e, 1)
	assert.Equal(t, ha[2:], e[0].BlockHashes, "a's last block: b and a[:4] hold the rest")
	held.Removed(hb[3], kv.MediumCPU, emit)
	e = take()
	require.Len(t, e, 1)
	assert.Equal(t, hb[2:], e[0].BlockHashes, "b's own blocks; a[:4] holds its first two")
	held.Removed(ha[1], kv.MediumCPU, emit)
	e = take()
	require.Len(t, e, 1)
	assert.Equal(t, ha[:2], e[0].BlockHashes, "the last prefix holding them: every block")
	assert.Empty(t, index)
	assert.Zero(t, held.Blocks())

	held.Removed(ha[1], kv.MediumCPU, emit)
	assert.Empty(t, take(), "a prefix not held")

	held.Stored(b, kv.MediumCPU, emit)
	held.Cleared(emit)
	assert.Equal(t, kv.AllBlocksCleared, take()[1].Kind)
	assert.False(t, held.Holds(hb[3]))
	assert.Empty(t, index)
}

// A router's number form of a hash is the digest's low 64 bits, never 0.
func TestBlockHashUint64(t *testing.T) {
	var h kv.BlockHash
	for i := range h {
		h[i] = byte(i)
	}
	assert.Equal(t, uint64(0x18191a1b1c1d1e1f), h.Uint64())
	h[24], h[25], h[26], h[27], h[28], h[29], h[30], h[31] = 0, 0, 0, 0, 0, 0, 0, 0
	assert.Equal(t, uint64(1), h.Uint64(), "0 names no block")
}
