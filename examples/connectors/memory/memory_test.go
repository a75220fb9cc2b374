package memory

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/conformance"
	"github.com/kvgen/kvgen/registry/kv"
)

func TestConformance(t *testing.T) {
	conformance.Run(t, New, conformance.Options{
		Extra:  func(t testing.TB) map[string]any { return map[string]any{"store": t.Name()} },
		Remove: evict,
	})
}

// evict evicts one layer of a prefix from the store extra names, as the
// store evicts its least recently used layer.
func evict(t testing.TB, extra map[string]any, prefix kv.BlockHash, layer string) {
	stores.Lock()
	s := stores.byName[extra["store"].(string)]
	stores.Unlock()
	require.NotNil(t, s, "store %v", extra["store"])
	s.mu.Lock()
	defer s.mu.Unlock()
	it, ok := s.items[itemKey{prefix, layer}]
	require.True(t, ok, "layer %s of %s is stored", layer, prefix)
	s.remove(it)
	s.evicted(prefix)
}

// The default store is shared by every test that names none; the suite's
// prompts keep them apart.
func TestConformanceDefaultSettings(t *testing.T) {
	conformance.Run(t, New, conformance.Options{})
}

const bs = 4

// open creates a connector on the store called name, closed when t ends.
func open(t testing.TB, name string, capacity int64, layers ...string) *connector {
	t.Helper()
	extra := map[string]any{"store": name}
	if capacity > 0 {
		extra["capacity_bytes"] = capacity
	}
	c, err := New(t.Context(), kv.Config{BlockSize: bs, LayerNames: layers, Extra: extra}, kv.RoleWorker)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c.(*connector)
}

// prompt returns a request of one block whose tokens start with first.
func prompt(first uint32) *kv.Request {
	return &kv.Request{ID: "r", PromptTokens: []uint32{first, 1, 2, 3}}
}

func bytesOf(n int, b byte) []byte {
	kvData := make([]byte, n)
	for i := range kvData {
		kvData[i] = b
	}
	return kvData
}

// stored reports whether layer "l" of the one-block prompt is held.
func stored(t *testing.T, c *connector, first uint32) bool {
	t.Helper()
	_, err := c.LoadLayer(t.Context(), prompt(first), "l", bs)
	if err != nil {
		require.ErrorIs(t, err, kv.ErrMiss)
		return false
	}
	return true
}

func TestEvictsLeastRecentlyUsed(t *testing.T) {
	ctx := t.Context()
	c := open(t, t.Name(), 3*itemCost(48), "l")
	for first := range uint32(3) {
		require.NoError(t, c.SaveLayer(ctx, prompt(first), "l", bs, bytesOf(48, byte(first))))
	}
	// Loading the oldest makes the second the least recently used.
	kvData, err := c.LoadLayer(ctx, prompt(0), "l", bs)
	require.NoError(t, err)
	assert.Equal(t, bytesOf(48, 0), kvData)
	require.NoError(t, c.SaveLayer(ctx, prompt(3), "l", bs, bytesOf(48, 3)))

	assert.False(t, stored(t, c, 1), "the least recently used layer is evicted")
	for _, first := range []uint32{0, 2, 3} {
		assert.True(t, stored(t, c, first), "layer of prompt %d", first)
	}
	n, err := c.MatchedTokens(ctx, prompt(1), 0)
	require.NoError(t, err)
	assert.Zero(t, n, "an evicted prefix is not promised")
}

// itemCost is what a layer named "l" of n bytes costs, n being a size the
// allocator does not round up.
func itemCost(n int) int64 { return int64(n) + int64(len("l")) + entryOverhead }

func TestCapacityAccounting(t *testing.T) {
	ctx := t.Context()
	c := open(t, t.Name(), itemCost(32)+itemCost(80), "l")
	require.NoError(t, c.SaveLayer(ctx, prompt(0), "l", bs, bytesOf(64, 0)))
	// Replacing a layer frees its old bytes.
	require.NoError(t, c.SaveLayer(ctx, prompt(0), "l", bs, bytesOf(32, 1)))
	assert.Equal(t, itemCost(32), c.store.used)
	require.NoError(t, c.SaveLayer(ctx, prompt(1), "l", bs, bytesOf(80, 2)))
	assert.Equal(t, itemCost(32)+itemCost(80), c.store.used, "a store may be filled exactly")
	assert.True(t, stored(t, c, 1))
	assert.True(t, stored(t, c, 0))

	err := c.SaveLayer(ctx, prompt(2), "l", bs, bytesOf(1024, 3))
	require.ErrorContains(t, err, "does not fit")
	assert.Equal(t, itemCost(32)+itemCost(80), c.store.used, "a layer too large for the store evicts nothing")

	// Loading prompt 0 last leaves prompt 1 to be evicted.
	require.NoError(t, c.SaveLayer(ctx, prompt(3), "l", bs, bytesOf(8, 4)))
	assert.False(t, stored(t, c, 1))
	assert.True(t, stored(t, c, 0))
	assert.Equal(t, itemCost(32)+itemCost(8), c.store.used)
}

// Layers of no bytes still cost their name and bookkeeping, so a store
// bounded at 1 MiB holds about a mebibyte of heap however many it is given.
func TestByteBoundHoldsForTinyLayers(t *testing.T) {
	const capacity = 1 << 20
	for _, nameLen := range []int{8, 1024} {
		t.Run(fmt.Sprintf("name=%dB", nameLen), func(t *testing.T) {
			ctx := t.Context()
			before := heapInUse()
			c := open(t, t.Name(), capacity)
			pad := strings.Repeat("x", nameLen)
			for i := range 100_000 {
				layer := fmt.Sprintf("%s%08d", pad, i)[8:]
				require.NoError(t, c.SaveLayer(ctx, prompt(uint32(i)), layer, bs, nil))
			}
			held := heapInUse() - before
			assert.LessOrEqual(t, c.store.used, int64(capacity))
			assert.LessOrEqual(t, held, int64(2*capacity), "heap held by a store of 1 MiB capacity")
			runtime.KeepAlive(c)
		})
	}
}

// The cost the store counts for its items covers the heap they take, for
// layer names short and long, with prefixes distinct or shared, at sizes
// just after and long after its maps grew.
func TestEntryCostCoversHeap(t *testing.T) {
	for _, n := range []int{1000, 3500, 7000, 30000, 100_000} {
		for _, shared := range []bool{false, true} {
			t.Run(fmt.Sprintf("items=%d/shared=%t", n, shared), func(t *testing.T) {
				before := heapInUse()
				s := newStore(t.Name(), 1<<62)
				for i := range n {
					var h kv.BlockHash
					if !shared {
						binary.LittleEndian.PutUint32(h[:], uint32(i))
					}
					layer := fmt.Sprintf("model.layers.%d.self_attn", i)
					err := s.put(itemKey{h, layer}, make([]byte, i%100), &eventGroup{}, nil)
					require.NoError(t, err)
				}
				held := heapInUse() - before
				assert.LessOrEqual(t, held, s.used, "heap held by %d items against their counted cost", n)
				runtime.KeepAlive(s)
			})
		}
	}
}

// heapInUse returns the bytes of live heap objects after a collection.
func heapInUse() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

func TestRolesShareAStore(t *testing.T) {
	ctx := t.Context()
	cfg := kv.Config{BlockSize: bs, LayerNames: []string{"l"}, Extra: map[string]any{"store": t.Name()}}
	w, err := New(ctx, cfg, kv.RoleWorker)
	require.NoError(t, err)
	defer w.Close()
	s, err := New(ctx, cfg, kv.RoleScheduler)
	require.NoError(t, err)
	defer s.Close()
	other := open(t, t.Name()+"-other", 0, "l")

	require.NoError(t, w.(kv.Worker).SaveLayer(ctx, prompt(7), "l", bs, []byte("kv")))
	n, err := s.(kv.Scheduler).MatchedTokens(ctx, prompt(7), 0)
	require.NoError(t, err)
	assert.Equal(t, bs, n, "the scheduler side sees the worker side's save")
	n, err = other.MatchedTokens(ctx, prompt(7), 0)
	require.NoError(t, err)
	assert.Zero(t, n, "a store of another name does not")
}

func TestStoreReleasedAfterLastClose(t *testing.T) {
	ctx := t.Context()
	cfg := kv.Config{BlockSize: bs, Extra: map[string]any{"store": t.Name()}}
	held := func() bool {
		stores.Lock()
		defer stores.Unlock()
		_, ok := stores.byName[t.Name()]
		return ok
	}
	a, err := New(ctx, cfg, kv.RoleWorker)
	require.NoError(t, err)
	b, err := New(ctx, cfg, kv.RoleScheduler)
	require.NoError(t, err)
	require.NoError(t, a.(kv.Worker).SaveLayer(ctx, prompt(0), "l", bs, []byte("kv")))

	require.NoError(t, a.Close())
	require.NoError(t, a.Close(), "a second Close must not release the store again")
	assert.True(t, held(), "the store outlives its first connector")
	n, err := b.(kv.Scheduler).MatchedTokens(ctx, prompt(0), 0)
	require.NoError(t, err)
	assert.Equal(t, bs, n, "layers with no LayerNames configured: one stored layer matches")

	require.NoError(t, b.Close())
	assert.False(t, held(), "the last Close releases the store")
	c := open(t, t.Name(), 0)
	assert.False(t, stored(t, c, 0), "a store reopened after release is empty")

	_, err = a.(kv.Worker).LoadLayer(ctx, prompt(0), "l", bs)
	assert.ErrorIs(t, err, errClosed)
}

func TestSettings(t *testing.T) {
	for _, c := range []struct {
		name  string
		cfg   kv.Config
		error string
	}{
		{"zero capacity", kv.Config{BlockSize: bs, Extra: map[string]any{"capacity_bytes": 0}}, "capacity_bytes 0"},
		{"capacity as text", kv.Config{BlockSize: bs, Extra: map[string]any{"capacity_bytes": "1GB"}}, "capacity_bytes"},
		{"empty store", kv.Config{BlockSize: bs, Extra: map[string]any{"store": ""}}, "store"},
		{"misspelt", kv.Config{BlockSize: bs, Extra: map[string]any{"capacity": 1}}, `did you mean "capacity_bytes"`},
		{"no block size", kv.Config{}, "block size 0: want a number of tokens from 1 to 65536"},
		// Rejected before anything is allocated for it.
		{"huge block size", kv.Config{BlockSize: 1 << 30}, "block size 1073741824: want a number of tokens from 1 to 65536"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := New(context.Background(), c.cfg, kv.RoleWorker)
			assert.Nil(t, conn)
			assert.ErrorContains(t, err, c.error)
		})
	}
}

func TestSharersAgreeOnCapacity(t *testing.T) {
	open(t, t.Name(), 1000)
	_, err := New(t.Context(), kv.Config{BlockSize: bs, Extra: map[string]any{"store": t.Name(), "capacity_bytes": 2000}}, kv.RoleWorker)
	assert.ErrorContains(t, err, "capacity_bytes 1000, not 2000")
}

// Store and layer names reach errors quoted and cut short: an escape
// sequence or a newline in them neither reaches a terminal raw nor forges
// a line, and a huge name does not flood a log.
func TestUserStringsAreQuotedInErrors(t *testing.T) {
	const evil = "\x1b[2J\nkvserver: forged error"
	open(t, evil, 1000)
	_, mismatch := New(t.Context(), kv.Config{BlockSize: bs, Extra: map[string]any{"store": evil, "capacity_bytes": 2000}}, kv.RoleWorker)
	w := open(t, t.Name(), 1000)
	huge := evil + strings.Repeat("x", 1<<20)
	tooLarge := w.SaveLayer(t.Context(), &kv.Request{ID: "r", PromptTokens: make([]uint32, bs)}, huge, bs, nil)
	for _, err := range []error{mismatch, tooLarge} {
		require.Error(t, err)
		assert.NotContains(t, err.Error(), "\n")
		assert.NotContains(t, err.Error(), "\x1b")
		assert.Contains(t, err.Error(), `"\x1b[2J\nkvserver: forged error`)
		assert.Less(t, len(err.Error()), 400)
	}
}
