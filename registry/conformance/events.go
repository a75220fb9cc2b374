package conformance

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// eventWait bounds how long a connector that reports asynchronously
// (from a store's notifications) may take to report a change.
const eventWait = 10 * time.Second

// eventLog collects what a connector reports.
type eventLog struct {
	mu     sync.Mutex
	events []kv.KVEvent
}

func (l *eventLog) add(e kv.KVEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) take() []kv.KVEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events
	l.events = nil
	return e
}

// blockIndex is a router's index of one engine's blocks, built by
// replaying its events, that checks each event against what the suite
// stored.
type blockIndex struct {
	blocks    map[kv.BlockHash]bool
	known     map[kv.BlockHash]knownBlock // every block of every prefix the suite saved
	blockSize int
	removals  int
}

// knownBlock is where a block lies: the prompt and the index of the block.
type knownBlock struct {
	req *kv.Request
	i   int
}

func newBlockIndex(blockSize int) *blockIndex {
	return &blockIndex{blocks: map[kv.BlockHash]bool{}, known: map[kv.BlockHash]knownBlock{}, blockSize: blockSize}
}

// saved notes the blocks of a prefix the suite saved.
func (x *blockIndex) saved(p kv.Prefixes, req *kv.Request, n int) {
	for i, h := range p.Hashes(req.PromptTokens[:n]) {
		x.known[h] = knownBlock{req, i}
	}
}

// apply replays events, checking each as vLLM's meaning has it: a
// BlockStored event names blocks not held, in order, chained to a held
// parent (nil at a prompt's start), with token_ids of blocks × block
// size; a BlockRemoved event names only held blocks.
func (x *blockIndex) apply(t *testing.T, events []kv.KVEvent) {
	t.Helper()
	for _, e := range events {
		switch e.Kind {
		case kv.BlockStored:
			require.NotEmpty(t, e.BlockHashes, "a BlockStored event names blocks")
			assert.Equal(t, x.blockSize, e.BlockSize, "block_size")
			assert.NotEmpty(t, e.Medium, "medium")
			first, ok := x.known[e.BlockHashes[0]]
			require.True(t, ok, "BlockStored of a block the suite never saved")
			if first.i == 0 {
				assert.Nil(t, e.ParentBlockHash, "parent_block_hash of a prompt's first block")
			} else if assert.NotNil(t, e.ParentBlockHash, "parent_block_hash of block %d", first.i) {
				assert.True(t, x.blocks[*e.ParentBlockHash], "parent_block_hash %s is a block held", e.ParentBlockHash)
			}
			want := first.req.PromptTokens[first.i*x.blockSize : (first.i+len(e.BlockHashes))*x.blockSize]
			assert.Equal(t, want, e.BlockTokenIDs(), "token_ids are exactly the blocks' tokens, blocks × block size")
			for j, h := range e.BlockHashes {
				k, ok := x.known[h]
				assert.True(t, ok && k.req == first.req && k.i == first.i+j, "block_hashes are the blocks in order")
				assert.False(t, x.blocks[h], "BlockStored of block %s, held already", h)
				x.blocks[h] = true
			}
		case kv.BlockRemoved:
			x.removals++
			for _, h := range e.BlockHashes {
				assert.True(t, x.blocks[h], "BlockRemoved of block %s, not held", h)
				delete(x.blocks, h)
			}
		case kv.AllBlocksCleared:
			clear(x.blocks)
		default:
			t.Errorf("event of kind %v", e.Kind)
		}
	}
}

// reporting creates a worker on the store extra configures and has it
// report its events to a log, or skips t if it reports none.
func (s *suite) reporting(t *testing.T, extra map[string]any) (kv.Worker, kv.EventReporter, kv.Prefixes, *eventLog) {
	s.needWorker(t)
	cfg := s.config(blockSize, extra)
	w := s.worker(t, cfg)
	r, ok := w.(kv.EventReporter)
	if !ok {
		t.Skip("the worker does not implement kv.EventReporter")
	}
	prefixes, err := cfg.Prefixes()
	require.NoError(t, err)
	log := &eventLog{}
	r.ReportEvents(log.add)
	return w, r, prefixes, log
}

// eventsMatchSaves checks a [kv.EventReporter]: a prefix is reported
// stored when its last layer is saved, naming the blocks it adds beyond
// the blocks held, chained to the one before them; a layer saved again
// reports nothing; and after ReportEvents(nil) nothing is reported.
func (s *suite) eventsMatchSaves(t *testing.T) {
	w, r, prefixes, log := s.reporting(t, s.extra(t))
	ctx := t.Context()
	req := s.request(t, "events", 3*blockSize)
	hashes := prefixes.Hashes(req.PromptTokens)
	index := newBlockIndex(blockSize)
	index.saved(prefixes, req, 3*blockSize)
	stored := func(n int, what string) {
		t.Helper()
		var events []kv.KVEvent
		require.Eventually(t, func() bool {
			events = append(events, log.take()...)
			return len(events) > 0
		}, eventWait, time.Millisecond, "%s: a BlockStored event", what)
		index.apply(t, events)
		require.Len(t, events, 1, "%s: one event", what)
		assert.Equal(t, kv.BlockStored, events[0].Kind, "%s", what)
		assert.Equal(t, hashes[n-1:n], events[0].BlockHashes, "%s: the block the prefix adds", what)
	}

	require.NoError(t, saveLayers(ctx, w, req, blockSize, 50, layerNames[:len(layerNames)-1]))
	assert.Empty(t, log.take(), "a prefix with a layer missing is not loadable: no event")
	require.NoError(t, saveLayers(ctx, w, req, blockSize, 50, layerNames[len(layerNames)-1:]))
	stored(1, "the last layer of a prefix saved")

	require.NoError(t, saveLayers(ctx, w, req, blockSize, 50, layerNames))
	assert.Empty(t, log.take(), "layers saved again complete nothing")

	require.NoError(t, saveLayers(ctx, w, req, 2*blockSize, 50, layerNames))
	stored(2, "a longer prefix saved")

	r.ReportEvents(nil)
	require.NoError(t, saveLayers(ctx, w, req, 3*blockSize, 50, layerNames))
	assert.Empty(t, log.take(), "after ReportEvents(nil)")
}

// eventsReplayToWhatLoads checks that a [kv.EventReporter]'s events,
// replayed into an index of blocks as a router does, give the blocks of
// the prefixes that load, for prefixes that share blocks; and, for a
// connector that reports removals, after layers are removed as its store
// removes them by itself ([Options.Remove]). A connector that declares
// itself store-only reports no removal.
func (s *suite) eventsReplayToWhatLoads(t *testing.T) {
	extra := s.extra(t)
	w, r, prefixes, log := s.reporting(t, extra)
	defer r.ReportEvents(nil)
	var removals error = fmt.Errorf("the worker does not implement kv.RemovalReporter")
	if rr, ok := w.(kv.RemovalReporter); ok {
		removals = rr.ReportsRemovals()
	}
	ctx := t.Context()

	// b shares its first block with a.
	a := s.request(t, "a", 3*blockSize)
	b := &kv.Request{ID: "b", PromptTokens: slices.Concat(a.PromptTokens[:blockSize], s.request(t, "b", 2*blockSize).PromptTokens)}
	c := s.request(t, "c", 2*blockSize)
	type prefix struct {
		req *kv.Request
		n   int
	}
	saved := []prefix{{a, blockSize}, {a, 3 * blockSize}, {b, 2 * blockSize}, {b, 3 * blockSize}, {c, 2 * blockSize}}
	index := newBlockIndex(blockSize)
	for _, p := range saved {
		index.saved(prefixes, p.req, p.n)
		require.NoError(t, saveLayers(ctx, w, p.req, p.n, 40, layerNames))
	}
	// loadable returns the blocks of the saved prefixes whose every layer
	// loads.
	loadable := func() map[kv.BlockHash]bool {
		out := map[kv.BlockHash]bool{}
		for _, p := range saved {
			if checkLayers(ctx, w, p.req, p.n, 40, layerNames) == nil {
				for _, h := range prefixes.Hashes(p.req.PromptTokens[:p.n]) {
					out[h] = true
				}
			}
		}
		return out
	}
	agree := func(what string) {
		t.Helper()
		var want map[kv.BlockHash]bool
		ok := assert.Eventually(t, func() bool {
			index.apply(t, log.take())
			want = loadable()
			return maps.Equal(want, index.blocks)
		}, eventWait, 5*time.Millisecond, "%s: the index replayed from the events is what loads", what)
		if !ok {
			t.Logf("%s: %d blocks load, %d in the index", what, len(want), len(index.blocks))
		}
	}
	agree("prefixes sharing blocks saved")
	require.Equal(t, 7, len(index.blocks), "a's 3 blocks, b's 2 more, c's 2")

	if removals != nil || s.opts.Remove == nil {
		time.Sleep(10 * time.Millisecond) // a late report has a chance to show
		index.apply(t, log.take())
		if removals != nil {
			t.Logf("store-only: %v", removals)
			assert.Zero(t, index.removals, "a store-only connector reported removals")
		}
		return
	}
	remove := func(p prefix, what string) {
		t.Helper()
		h, err := prefixes.Hash(p.req.PromptTokens, p.n)
		require.NoError(t, err)
		s.opts.Remove(t, extra, h, layerNames[1])
		agree(what)
	}
	remove(saved[1], "a's longest prefix removed: its last 2 blocks go, b holds the first")
	remove(saved[2], "b's shorter prefix removed: its longer one holds its blocks")
	remove(saved[3], "b's longest prefix removed: its blocks go, a's first prefix holds the first")
	remove(saved[0], "a's first prefix removed: the last holder of the shared block")
	assert.Equal(t, 2, len(index.blocks), "c's blocks")
	assert.Positive(t, index.removals, "BlockRemoved events")
}
