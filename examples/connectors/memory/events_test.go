package memory

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// An eviction that leaves a prefix with a layer missing reports that
// prefix removed, before the save that evicted it reports its own prefix
// stored; the eviction of a prefix's second layer reports nothing more.
func TestEvictionsAreReportedRemoved(t *testing.T) {
	layer := cost("l0", make([]byte, 1000))
	c := open(t, t.Name(), 2*layer+layer/2, "l0", "l1") // room for two layers
	var events []kv.KVEvent
	c.ReportEvents(func(e kv.KVEvent) { events = append(events, e) })
	ctx := t.Context()

	a, b := prompt(1), prompt(2)
	require.NoError(t, c.SaveLayer(ctx, a, "l0", bs, make([]byte, 1000)))
	require.NoError(t, c.SaveLayer(ctx, a, "l1", bs, make([]byte, 1000)))
	require.Len(t, events, 1)
	assert.Equal(t, kv.BlockStored, events[0].Kind)
	hashA := events[0].BlockHashes[0]

	require.NoError(t, c.SaveLayer(ctx, b, "l0", bs, make([]byte, 1000))) // evicts a's l0
	require.Len(t, events, 2)
	assert.Equal(t, kv.RemovedEvent(hashA, kv.MediumCPU), events[1])

	require.NoError(t, c.SaveLayer(ctx, b, "l1", bs, make([]byte, 1000))) // evicts a's l1: a was already gone
	require.Len(t, events, 3)
	assert.Equal(t, kv.BlockStored, events[2].Kind)
	assert.NotEqual(t, hashA, events[2].BlockHashes[0])

	sched := open(t, t.Name(), 2*layer+layer/2, "l0", "l1")
	n, err := sched.MatchedTokens(ctx, a, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "a prefix reported removed is not matched")
}
