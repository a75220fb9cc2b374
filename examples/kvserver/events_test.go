//go:build unix

package main

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// wireEvent is one line of /events, as a router decodes it.
type wireEvent struct {
	Type        string   `json:"type"`
	BlockHashes []string `json:"block_hashes"`
	Parent      *string  `json:"parent_block_hash"`
	TokenIDs    []uint32 `json:"token_ids"`
	BlockSize   int      `json:"block_size"`
	Medium      *string  `json:"medium"`
}

// A router follows /events through a dozen 256-token prefills that
// overflow a small memory store: the stored blocks chain by parent hash,
// token_ids are blocks × block size, a removal names every block of an
// evicted prefix (the block its prompt shares with the others only with
// the last of them), and the index replayed from the events is what the
// store can still load.
func TestEventsKeepARoutersIndexTrue(t *testing.T) {
	const config = `{"kv_connector":"memory","kv_connector_extra_config":{"capacity_bytes":500000,"store":"events-index"}}`
	s := serveInProcess(t, Registry, "-kv-transfer-config", config)
	follow, err := http.Get(s.base + "/events")
	require.NoError(t, err)
	defer follow.Body.Close()
	lines := make(chan wireEvent, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(follow.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var e wireEvent
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				lines <- e
			}
		}
	}()

	// The same store, seen as the scheduler sees it: what can be loaded.
	cfg, err := kv.ParseTransferConfig([]byte(config))
	require.NoError(t, err)
	for i := range 4 {
		cfg.LayerNames = append(cfg.LayerNames, fmt.Sprintf("model.layers.%d.self_attn", i))
	}
	sched, err := Registry.CreateScheduler(t.Context(), cfg)
	require.NoError(t, err)
	defer sched.Close()
	prefixes, err := cfg.Prefixes()
	require.NoError(t, err)

	shared := "you are a helpful assistant who answers in short plain words and never guesses at facts"
	var prompts []string
	for i := range 12 {
		prompts = append(prompts, fmt.Sprintf("%s question-%d", shared, i))
	}
	index := map[string]bool{}
	everStored := map[string]bool{}
	var removed [][]string
	apply := func(e wireEvent) {
		switch e.Type {
		case "BlockStored":
			if e.Parent != nil {
				assert.True(t, index[*e.Parent], "parent %s is a block held", *e.Parent)
			}
			assert.Len(t, e.TokenIDs, len(e.BlockHashes)*e.BlockSize, "token_ids are blocks × block size")
			for _, h := range e.BlockHashes {
				assert.False(t, index[h], "a block stored is not held already")
				index[h], everStored[h] = true, true
			}
		case "BlockRemoved":
			for _, h := range e.BlockHashes {
				assert.True(t, index[h], "a block removed was held")
				delete(index, h)
			}
			removed = append(removed, e.BlockHashes)
		case "AllBlocksCleared":
			clear(index)
		}
	}
	hexes := func(hs []kv.BlockHash) []string {
		out := make([]string, len(hs))
		for i, h := range hs {
			out[i] = hex.EncodeToString(h[:])
		}
		return out
	}
	var stored []*kv.Request
	for i, p := range prompts {
		var r prefillReport
		post(t, s.base, "prefill", fmt.Sprintf(`{"prompt":%q,"tokens":256}`, p), &r)
		require.Equal(t, 240, r.Saved)
		req := &kv.Request{ID: fmt.Sprint(i), PromptTokens: tokenize(p, 256)[:240]}
		stored = append(stored, req)
		// Each prefill reports its store: take events until its last block
		// arrives.
		last := hexes(prefixes.Hashes(req.PromptTokens))[14]
		for !index[last] {
			select {
			case e, ok := <-lines:
				require.True(t, ok, "the stream ended")
				apply(e)
			case <-time.After(10 * time.Second):
				t.Fatalf("prefill %d: no BlockStored of its last block", i)
			}
		}
	}
	require.NotEmpty(t, removed, "a dozen prefills overflow the store")

	// What the store can still load, as the scheduler matches it.
	loadable := map[string]bool{}
	for _, req := range stored {
		n, err := sched.MatchedTokens(t.Context(), req, 0)
		require.NoError(t, err)
		if n == len(req.PromptTokens) {
			for _, h := range hexes(prefixes.Hashes(req.PromptTokens)) {
				loadable[h] = true
			}
		}
	}
	assert.NotEmpty(t, loadable)
	assert.True(t, maps.Equal(loadable, index), "the index replayed from /events (%d blocks) is what loads (%d blocks)", len(index), len(loadable))

	// Every block of an evicted prompt is named: its own 14 blocks, and
	// the shared first one once no prompt holds it.
	first := hexes(prefixes.Hashes(stored[0].PromptTokens))
	var named []string
	for _, r := range removed {
		named = append(named, r...)
	}
	assert.Subset(t, named, first[1:], "the first prompt's own blocks were all removed")
	assert.Equal(t, index[first[0]], len(loadable) > 0, "the shared block is held while any prompt is")
}
