package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// An eviction that leaves a prefix with a layer missing reports removed
// every block of it no other prefix holds, before the save that evicted
// it reports what it stored; the eviction of its second layer reports
// nothing more.
func TestEvictionsAreReportedRemoved(t *testing.T) {
	layer := cost("l0", make([]byte, 1000))
	c := open(t, t.Name(), 2*layer+layer/2, "l0", "l1") // room for two layers
	var events []kv.KVEvent
	c.ReportEvents(func(e kv.KVEvent) { events = append(events, e) })
	ctx := t.Context()

	long := &kv.Request{ID: "a", PromptTokens: []uint32{1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3}}
	hashes := c.prefixes.Hashes(long.PromptTokens)
	require.NoError(t, c.SaveLayer(ctx, long, "l0", 3*bs, make([]byte, 1000)))
	require.NoError(t, c.SaveLayer(ctx, long, "l1", 3*bs, make([]byte, 1000)))
	require.Len(t, events, 1)
	assert.Equal(t, kv.BlockStored, events[0].Kind)
	assert.Equal(t, hashes, events[0].BlockHashes)

	b := prompt(9)
	require.NoError(t, c.SaveLayer(ctx, b, "l0", bs, make([]byte, 1000))) // evicts long's l0
	require.Len(t, events, 2)
	assert.Equal(t, kv.KVEvent{Kind: kv.BlockRemoved, BlockHashes: hashes, Medium: kv.MediumCPU}, events[1],
		"every block of the evicted prefix, not only its last")

	require.NoError(t, c.SaveLayer(ctx, b, "l1", bs, make([]byte, 1000))) // evicts long's l1: it was already gone
	require.Len(t, events, 3)
	assert.Equal(t, kv.BlockStored, events[2].Kind)
	assert.Equal(t, c.prefixes.Hashes(b.PromptTokens), events[2].BlockHashes)

	sched := open(t, t.Name(), 2*layer+layer/2, "l0", "l1")
	n, err := sched.MatchedTokens(ctx, long, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "a prefix reported removed is not matched")
}

// Prefixes that share blocks: a store names only the blocks it adds,
// chained to the one before them, and an eviction names only the blocks
// no prefix still held contains.
func TestSharedBlocksAreCountedOnce(t *testing.T) {
	layer := cost("l0", make([]byte, 100))
	c := open(t, t.Name(), 2*layer+layer/2, "l0") // room for two prefixes
	var events []kv.KVEvent
	c.ReportEvents(func(e kv.KVEvent) { events = append(events, e) })
	ctx := t.Context()

	a := &kv.Request{ID: "a", PromptTokens: []uint32{1, 1, 1, 1, 2, 2, 2, 2}}
	b := &kv.Request{ID: "b", PromptTokens: []uint32{1, 1, 1, 1, 3, 3, 3, 3}}
	ha, hb := c.prefixes.Hashes(a.PromptTokens), c.prefixes.Hashes(b.PromptTokens)
	require.NoError(t, c.SaveLayer(ctx, a, "l0", 2*bs, make([]byte, 100)))
	require.NoError(t, c.SaveLayer(ctx, b, "l0", 2*bs, make([]byte, 100)))
	require.Len(t, events, 2)
	assert.Equal(t, hb[1:], events[1].BlockHashes, "b adds one block")
	assert.Equal(t, &hb[0], events[1].ParentBlockHash, "chained to the block it shares with a")
	assert.Equal(t, b.PromptTokens[bs:], events[1].BlockTokenIDs())

	require.NoError(t, c.SaveLayer(ctx, prompt(9), "l0", bs, make([]byte, 100))) // evicts a
	require.Len(t, events, 4)
	assert.Equal(t, kv.KVEvent{Kind: kv.BlockRemoved, BlockHashes: ha[1:], Medium: kv.MediumCPU}, events[2],
		"a's first block is b's too")
	require.NoError(t, c.SaveLayer(ctx, prompt(8), "l0", bs, make([]byte, 100))) // evicts b
	require.Len(t, events, 6)
	assert.Equal(t, kv.KVEvent{Kind: kv.BlockRemoved, BlockHashes: hb, Medium: kv.MediumCPU}, events[4])
}

// Two connectors of one store both asking for events each get every
// change, whichever connector's save made it.
func TestEveryReportingConnectorOfAStoreGetsItsChanges(t *testing.T) {
	layer := cost("l0", make([]byte, 100))
	saver := open(t, t.Name(), layer+layer/2, "l0")
	watcher := open(t, t.Name(), layer+layer/2, "l0")
	var events []kv.KVEvent
	watcher.ReportEvents(func(e kv.KVEvent) { events = append(events, e) })
	ctx := t.Context()
	require.NoError(t, saver.SaveLayer(ctx, prompt(1), "l0", bs, make([]byte, 100)))
	require.NoError(t, saver.SaveLayer(ctx, prompt(2), "l0", bs, make([]byte, 100)))
	require.Len(t, events, 3)
	assert.Equal(t, []kv.EventKind{kv.BlockStored, kv.BlockRemoved, kv.BlockStored}, []kv.EventKind{events[0].Kind, events[1].Kind, events[2].Kind})
	require.NoError(t, watcher.ReportsRemovals())
}

// A prefix is reported stored to the connectors that can load it, by the
// names of the layers they load: connectors of one store and model that
// load other layers each learn it when theirs are held, and a layer no
// connector loads completes nothing.
func TestEventsFollowTheLayersEachConnectorLoads(t *testing.T) {
	ctx := t.Context()
	one := open(t, t.Name(), 1<<20, "l0")
	two := open(t, t.Name(), 1<<20, "l0", "l1")
	var oneEvents, twoEvents []kv.KVEvent
	one.ReportEvents(func(e kv.KVEvent) { oneEvents = append(oneEvents, e) })
	two.ReportEvents(func(e kv.KVEvent) { twoEvents = append(twoEvents, e) })
	req := prompt(3)

	require.NoError(t, two.SaveLayer(ctx, req, "other", bs, make([]byte, 10)))
	assert.Empty(t, oneEvents, "a layer no connector loads completes nothing")
	assert.Empty(t, twoEvents)

	require.NoError(t, two.SaveLayer(ctx, req, "l0", bs, make([]byte, 10)))
	require.Len(t, oneEvents, 1, "l0 is all one loads")
	assert.Equal(t, kv.BlockStored, oneEvents[0].Kind)
	assert.Empty(t, twoEvents, "two loads l1 too")
	n, err := two.MatchedTokens(ctx, req, 0)
	require.NoError(t, err)
	assert.Zero(t, n)

	require.NoError(t, one.SaveLayer(ctx, req, "l1", bs, make([]byte, 10)))
	require.Len(t, twoEvents, 1)
	assert.Equal(t, kv.BlockStored, twoEvents[0].Kind)
	assert.Len(t, oneEvents, 1, "one held it already")
	n, err = two.MatchedTokens(ctx, req, 0)
	require.NoError(t, err)
	assert.Equal(t, bs, n)
}
