package kv_test

import (
	"context"
	"errors"
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

func TestRecorderCountsOnlyOnceRead(t *testing.T) {
	var r kv.StatsRecorder
	assert.True(t, r.Start().IsZero(), "nobody reads the stats: no clock read")
	begun := r.Start() // a load begun before the first read ends after it
	r.Failed(kv.ErrorSave)
	assert.Equal(t, kv.Stats{}, r.Stats(), "nothing is counted before the first read")
	r.Loaded(begun, 100)
	assert.Zero(t, r.Stats().Hits, "nor a load it had not timed")

	start := r.Start()
	require.False(t, start.IsZero())
	r.Loaded(start, 100)
	r.Loaded(r.Start(), 20)
	r.Missed(r.Start())
	r.Saved(r.Start(), 7)
	r.Failed(kv.ErrorCorrupt)
	r.Failed(kv.ErrorCorrupt)
	s := r.Stats()
	assert.Equal(t, uint64(2), s.Hits)
	assert.Equal(t, uint64(1), s.Misses)
	assert.Equal(t, uint64(120), s.BytesLoaded)
	assert.Equal(t, uint64(7), s.BytesSaved)
	assert.Equal(t, uint64(3), s.LoadLatency.Count())
	assert.Equal(t, uint64(1), s.SaveLatency.Count())
	assert.Equal(t, [kv.NumErrorKinds]uint64{0, 0, 2}, s.Errors)
	assert.Positive(t, s.LoadLatency.Sum)
}

func TestHistogramBuckets(t *testing.T) {
	var r kv.StatsRecorder
	r.Stats()
	bounds := kv.LatencyBounds()
	r.Loaded(time.Now().Add(-2*time.Millisecond), 1) // in (1ms, 2.5ms]
	r.Loaded(time.Now().Add(-time.Minute), 1)        // above every bound
	h := r.Stats().LoadLatency
	i := 0
	for bounds[i] < 2500*time.Microsecond {
		i++
	}
	assert.Equal(t, uint64(1), h.Counts[i], "2ms is counted under the 2.5ms bound")
	assert.Equal(t, uint64(1), h.Counts[len(bounds)], "a minute is above the last bound")
	assert.Len(t, h.Counts, len(bounds)+1)
}

func TestStatsMergeAndTotal(t *testing.T) {
	a := kv.Stats{Hits: 1, BytesLoaded: 10, Errors: [kv.NumErrorKinds]uint64{1, 0, 0}}
	b := kv.Stats{Misses: 2, BytesSaved: 5, Children: map[string]kv.Stats{"redis": {Hits: 3}}}
	b.LoadLatency.Counts[0] = 4
	m := a.Clone()
	m.Merge(b)
	m.Merge(kv.Stats{Children: map[string]kv.Stats{"redis": {Hits: 1}, "filesystem": {Misses: 1}}})
	assert.Equal(t, uint64(1), m.Hits)
	assert.Equal(t, uint64(2), m.Misses)
	assert.Equal(t, uint64(4), m.LoadLatency.Counts[0])
	assert.Equal(t, uint64(4), m.Children["redis"].Hits, "children merge by label")
	assert.Equal(t, uint64(1), m.Children["filesystem"].Misses)
	assert.Equal(t, uint64(1), a.Hits, "Merge leaves its argument alone")
	assert.Nil(t, a.Children)

	total := m.Total()
	assert.Nil(t, total.Children)
	assert.Equal(t, uint64(5), total.Hits)
	assert.Equal(t, uint64(3), total.Misses)
	assert.Equal(t, uint64(1), total.Errors[kv.ErrorLoad])
}

// countingConn is a worker that counts through a StatsRecorder and reports
// a BlockStored event per saved prefix.
type countingConn struct {
	kv.StatsRecorder
	held   *kv.HeldBlocks
	medium string
	mu     sync.Mutex
	emit   func(kv.KVEvent)
	kv     map[string][]byte
}

func countingFactory(medium string) kv.Factory {
	return func(_ context.Context, cfg kv.Config, _ kv.Role) (kv.Connector, error) {
		p, err := cfg.Prefixes()
		return &countingConn{held: p.HeldBlocks(), medium: medium, kv: map[string][]byte{}}, err
	}
}

func (c *countingConn) KVStats() kv.Stats { return c.Stats() }

func (c *countingConn) ReportEvents(emit func(kv.KVEvent)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.emit = emit
}

func (c *countingConn) SaveLayer(_ context.Context, req *kv.Request, layer string, n int, kvData []byte) error {
	start := c.Start()
	c.mu.Lock()
	c.kv[fmt.Sprint(n, layer)] = append([]byte(nil), kvData...)
	emit := c.emit
	c.mu.Unlock()
	c.Saved(start, len(kvData))
	c.held.Stored(req.PromptTokens[:n], c.medium, emit)
	return nil
}

func (c *countingConn) LoadLayer(_ context.Context, _ *kv.Request, layer string, n int) ([]byte, error) {
	start := c.Start()
	c.mu.Lock()
	kvData, ok := c.kv[fmt.Sprint(n, layer)]
	c.mu.Unlock()
	if !ok {
		c.Missed(start)
		return nil, kv.ErrMiss
	}
	c.Loaded(start, len(kvData))
	return append([]byte(nil), kvData...), nil
}

func (c *countingConn) WaitForSave(context.Context) error { return nil }
func (c *countingConn) Finished(_ context.Context, f []string) ([]string, []string, error) {
	return f, f, nil
}
func (c *countingConn) Close() error { return nil }

// A MultiConnector reports its children's stats by child, and their events.
func TestMultiConnectorStatsAndEventsByChild(t *testing.T) {
	reg := kv.MustNew(
		kv.Entry{Name: kv.MultiConnectorName, Factory: kv.NewMultiConnector},
		kv.Entry{Name: "disk", Factory: countingFactory(kv.MediumDisk)},
		kv.Entry{Name: "cpu", Factory: countingFactory(kv.MediumCPU)},
		kv.Entry{Name: "plain", Factory: storeFactory(newKVStore())},
	)
	cfg, err := kv.ParseTransferConfig([]byte(multiOf(`{"kv_connector":"disk"}`, `{"kv_connector":"plain"}`, `{"kv_connector":"disk"}`, `{"kv_connector":"cpu"}`)))
	require.NoError(t, err)
	w, err := reg.CreateWorker(t.Context(), cfg)
	require.NoError(t, err)
	defer w.Close()

	var events []kv.KVEvent
	var mu sync.Mutex
	w.(kv.EventReporter).ReportEvents(func(e kv.KVEvent) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, e)
	})
	stats := w.(kv.StatsReporter)
	assert.Equal(t, []string{"cpu", "disk", "disk#2"}, keys(stats.KVStats().Children), "one label a child, a listed-again name numbered; a child that counts nothing left out")

	require.NoError(t, w.SaveLayer(t.Context(), prompt, "l0", 8, []byte("kv-of-8")))
	_, err = w.LoadLayer(t.Context(), prompt, "l0", 8)
	require.NoError(t, err)
	_, err = w.LoadLayer(t.Context(), prompt, "l1", 8)
	require.True(t, errors.Is(err, kv.ErrMiss))

	s := stats.KVStats()
	assert.Equal(t, uint64(7), s.Children["disk"].BytesSaved)
	assert.Equal(t, uint64(7), s.Children["disk#2"].BytesSaved)
	assert.Equal(t, uint64(1), s.Children["disk"].Hits, "the first child served the load")
	assert.Zero(t, s.Children["disk#2"].Hits)
	assert.Equal(t, uint64(1), s.Children["cpu"].Misses, "the miss was asked of every child")
	total := s.Total()
	assert.Equal(t, uint64(21), total.BytesSaved)
	assert.Equal(t, uint64(1), total.Hits)

	require.Len(t, events, 3, "one BlockStored a child that reports events")
	want, err := kv.NewPrefixes("", 4)
	require.NoError(t, err)
	for _, e := range events {
		assert.Equal(t, kv.BlockStored, e.Kind)
		assert.Equal(t, want.Hashes(prompt.PromptTokens[:8]), e.BlockHashes)
		assert.Equal(t, prompt.PromptTokens[:8], e.TokenIDs)
		assert.Equal(t, 4, e.BlockSize)
	}
	assert.Equal(t, kv.MediumCPU, events[2].Medium)
}

func keys(m map[string]kv.Stats) []string { return slices.Sorted(maps.Keys(m)) }

func TestEventJSONHasVLLMFields(t *testing.T) {
	p, err := kv.NewPrefixes("m", 2)
	require.NoError(t, err)
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7}
	h := p.Hashes(tokens)
	var events []kv.KVEvent
	emit := func(e kv.KVEvent) { events = append(events, e) }
	held := p.HeldBlocks()
	held.Stored(tokens[:4], kv.MediumDisk, emit)
	held.Stored(tokens[:6], kv.MediumDisk, emit)
	held.Removed(h[2], kv.MediumDisk, emit)
	held.Cleared(emit)
	require.Len(t, events, 4)
	want := []string{
		fmt.Sprintf(`{"type":"BlockStored","block_hashes":[%q,%q],"parent_block_hash":null,"token_ids":[1,2,3,4],"block_size":2,"lora_id":null,"medium":"DISK","lora_name":null}`, h[0], h[1]),
		fmt.Sprintf(`{"type":"BlockStored","block_hashes":[%q],"parent_block_hash":%q,"token_ids":[5,6],"block_size":2,"lora_id":null,"medium":"DISK","lora_name":null}`, h[2], h[1]),
		fmt.Sprintf(`{"type":"BlockRemoved","block_hashes":[%q],"medium":"DISK"}`, h[2]),
		`{"type":"AllBlocksCleared"}`,
	}
	for i, e := range events {
		b, err := e.MarshalJSON()
		require.NoError(t, err)
		assert.JSONEq(t, want[i], string(b))
	}
	tokens[0] = 9
	assert.Equal(t, uint32(1), events[0].TokenIDs[0], "the event's tokens are its own")
	assert.Equal(t, []uint32{1, 2, 3, 4, 5, 6}, events[1].TokenIDs, "TokenIDs are the prefix's, from the prompt's start")
}

func TestLoadError(t *testing.T) {
	cause := errors.New("checksum mismatch")
	err := fmt.Errorf("redis: %w", &kv.LoadError{Layer: "l\n1", FirstBlock: 2, EndBlock: 6, BlockSize: 16, Err: cause})
	assert.True(t, errors.Is(err, kv.ErrMiss), "a failed load is a miss to a caller that only asks that")
	assert.True(t, errors.Is(err, cause))
	assert.Equal(t, `redis: layer "l\n1": blocks 2 to 5 (tokens 32 to 95) failed to load: checksum mismatch`, err.Error())
	first, end := kv.FailedBlocks(err, 96, 16)
	assert.Equal(t, [2]int{2, 6}, [2]int{first, end})
	first, end = kv.FailedBlocks(kv.ErrMiss, 96, 16)
	assert.Equal(t, [2]int{0, 6}, [2]int{first, end}, "any other error fails the whole prefix")
}
