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

	sched, prefixes := storeView(t, config)

	shared := "you are a helpful assistant who answers in short plain words and never guesses at facts"
	var prompts []string
	for i := range 12 {
		prompts = append(prompts, fmt.Sprintf("%s question-%d", shared, i))
	}
	index := blockIndex[string]{}
	var removed [][]string
	apply := func(e wireEvent) {
		index.apply(t, e.Type, e.Parent, e.BlockHashes, len(e.TokenIDs), e.BlockSize)
		if e.Type == "BlockRemoved" {
			removed = append(removed, e.BlockHashes)
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
	loads := loadable(t, sched, prefixes, stored, func(h kv.BlockHash) string { return hex.EncodeToString(h[:]) })
	assert.NotEmpty(t, loads)
	assert.True(t, maps.Equal(loads, index), "the index replayed from /events (%d blocks) is what loads (%d blocks)", len(index), len(loads))

	// Every block of an evicted prompt is named: its own 14 blocks, and
	// the shared first one once no prompt holds it.
	first := hexes(prefixes.Hashes(stored[0].PromptTokens))
	var named []string
	for _, r := range removed {
		named = append(named, r...)
	}
	assert.Subset(t, named, first[1:], "the first prompt's own blocks were all removed")
	assert.Equal(t, index[first[0]], len(loads) > 0, "the shared block is held while any prompt is")
}

// A router follows /events for longer than -read-timeout, which bounds
// reading a request, not the answer that streams to it: the stream stays
// open and brings the next prefill's events.
func TestEventsOutliveTheReadTimeout(t *testing.T) {
	const config = `{"kv_connector":"memory","kv_connector_extra_config":{"capacity_bytes":500000,"store":"events-read-timeout"}}`
	s := serveInProcess(t, Registry, "-kv-transfer-config", config, "-read-header-timeout", "300ms", "-read-timeout", "300ms")
	follow, err := http.Get(s.base + "/events")
	require.NoError(t, err)
	defer follow.Body.Close()
	time.Sleep(time.Second)
	var r map[string]any
	post(t, s.base, "prefill", `{"prompt":"a prompt after the read timeout","tokens":64}`, &r)
	line, err := bufio.NewReader(follow.Body).ReadString('\n')
	require.NoError(t, err, "the stream ended before the prefill's events")
	assert.Contains(t, line, `"BlockStored"`)
}
