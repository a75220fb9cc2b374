//go:build unix

package main

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// blockIndex is a router's index of the blocks a connector holds, built
// by applying its events in order, each checked as a router relies on
// it. H is a block hash as a wire carries it: hex on /events, uint64 on
// vLLM's ZeroMQ wire.
type blockIndex[H comparable] map[H]bool

// apply applies one event: a stored block's parent is held and the block
// is not yet, token_ids are blocks × block size; a removed block was held.
func (x blockIndex[H]) apply(t *testing.T, typ string, parent *H, hashes []H, tokenIDs, blockSize int) {
	t.Helper()
	switch typ {
	case "BlockStored":
		if parent != nil {
			assert.True(t, x[*parent], "parent %v is a block held", *parent)
		}
		assert.Equal(t, len(hashes)*blockSize, tokenIDs, "token_ids are blocks × block size")
		for _, h := range hashes {
			assert.False(t, x[h], "a block stored is not held already")
			x[h] = true
		}
	case "BlockRemoved":
		for _, h := range hashes {
			assert.True(t, x[h], "a block removed was held")
			delete(x, h)
		}
	case "AllBlocksCleared":
		clear(x)
	}
}

// storeView opens the store a transfer config names as the scheduler
// sees it, with the 4 layers kvserver saves: what can be loaded.
func storeView(t *testing.T, config string) (kv.Scheduler, kv.Prefixes) {
	t.Helper()
	cfg, err := kv.ParseTransferConfig([]byte(config))
	require.NoError(t, err)
	for i := range 4 {
		cfg.LayerNames = append(cfg.LayerNames, fmt.Sprintf("model.layers.%d.self_attn", i))
	}
	sched, err := Registry.CreateScheduler(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { sched.Close() })
	prefixes, err := cfg.Prefixes()
	require.NoError(t, err)
	return sched, prefixes
}

// loadable is the index the store itself gives: every block of each
// request the scheduler matches whole, keyed as key keys it.
func loadable[H comparable](t *testing.T, sched kv.Scheduler, prefixes kv.Prefixes, stored []*kv.Request, key func(kv.BlockHash) H) blockIndex[H] {
	t.Helper()
	blocks := blockIndex[H]{}
	for _, req := range stored {
		n, err := sched.MatchedTokens(t.Context(), req, 0)
		require.NoError(t, err)
		if n == len(req.PromptTokens) {
			for _, h := range prefixes.Hashes(req.PromptTokens) {
				blocks[key(h)] = true
			}
		}
	}
	return blocks
}
