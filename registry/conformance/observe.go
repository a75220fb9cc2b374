package conformance

import (
	"errors"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// statsAddUp checks a [kv.StatsReporter]: the counts are zero until
// the suite works the connector, and then are what it did, layer by layer.
func (s *suite) statsAddUp(t *testing.T) {
	s.needWorker(t)
	w := s.worker(t, s.config(blockSize, s.extra(t)))
	r, ok := w.(kv.StatsReporter)
	if !ok {
		t.Skip("the worker does not implement kv.StatsReporter")
	}
	r.KVStats() // starts the counting
	require.Equal(t, kv.Stats{}, r.KVStats().Total(), "KVStats before any transfer")

	ctx := t.Context()
	req := s.request(t, "stats", 3*blockSize)
	n, base := 2*blockSize, 100
	require.NoError(t, saveLayers(ctx, w, req, n, base, layerNames))
	require.NoError(t, checkLayers(ctx, w, req, n, base, layerNames))
	_, err := w.LoadLayer(ctx, req, layerNames[0], 3*blockSize)
	require.ErrorIs(t, err, kv.ErrMiss)

	var bytes uint64
	for i := range layerNames {
		bytes += uint64(layerSize(base, i))
	}
	got := r.KVStats().Total()
	assert.Equal(t, uint64(len(layerNames)), got.Hits, "Hits: one a layer loaded")
	assert.Equal(t, uint64(1), got.Misses, "Misses: the one layer not stored")
	assert.Equal(t, bytes, got.BytesLoaded, "BytesLoaded")
	assert.Equal(t, bytes, got.BytesSaved, "BytesSaved")
	assert.Equal(t, got.Hits+got.Misses, got.LoadLatency.Count(), "LoadLatency times every load")
	assert.Equal(t, uint64(len(layerNames)), got.SaveLatency.Count(), "SaveLatency times every save")
	assert.Equal(t, [kv.NumErrorKinds]uint64{}, got.Errors, "Errors")
}

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

// eventsMatchSaves checks a [kv.EventReporter]: a prefix whose every
// layer is saved is reported stored once, with vLLM's fields; a layer
// saved again reports nothing; a removal names a prefix reported stored;
// and after ReportEvents(nil) nothing is reported.
func (s *suite) eventsMatchSaves(t *testing.T) {
	s.needWorker(t)
	cfg := s.config(blockSize, s.extra(t))
	w := s.worker(t, cfg)
	r, ok := w.(kv.EventReporter)
	if !ok {
		t.Skip("the worker does not implement kv.EventReporter")
	}
	prefixes, err := cfg.Prefixes()
	require.NoError(t, err)
	var log eventLog
	r.ReportEvents(log.add)
	ctx := t.Context()
	req := s.request(t, "events", 3*blockSize)
	stored := map[kv.BlockHash]bool{}
	check := func(n int, what string) {
		t.Helper()
		var storedEvents int
		for _, e := range log.take() {
			switch e.Kind {
			case kv.BlockStored:
				storedEvents++
				assert.Equal(t, prefixes.Hashes(req.PromptTokens[:n]), e.BlockHashes, "%s: block_hashes", what)
				assert.Nil(t, e.ParentBlockHash, "%s: parent_block_hash of a prefix", what)
				assert.Equal(t, req.PromptTokens[:n], e.TokenIDs, "%s: token_ids", what)
				assert.Equal(t, blockSize, e.BlockSize, "%s: block_size", what)
				assert.NotEmpty(t, e.Medium, "%s: medium", what)
				if len(e.BlockHashes) > 0 {
					stored[e.BlockHashes[len(e.BlockHashes)-1]] = true
				}
			case kv.BlockRemoved:
				for _, h := range e.BlockHashes {
					assert.True(t, stored[h], "%s: BlockRemoved of %s, never reported stored", what, h)
				}
			default:
				t.Errorf("%s: event of kind %v", what, e.Kind)
			}
		}
		assert.Equal(t, 1, storedEvents, "%s: BlockStored events", what)
	}

	require.NoError(t, saveLayers(ctx, w, req, blockSize, 50, layerNames[:len(layerNames)-1]))
	assert.Empty(t, log.take(), "a prefix with a layer missing is not loadable: no event")
	require.NoError(t, saveLayers(ctx, w, req, blockSize, 50, layerNames[len(layerNames)-1:]))
	check(blockSize, "the last layer of a prefix saved")

	require.NoError(t, saveLayers(ctx, w, req, blockSize, 50, layerNames))
	assert.Empty(t, log.take(), "layers saved again complete nothing")

	require.NoError(t, saveLayers(ctx, w, req, 2*blockSize, 50, layerNames))
	check(2*blockSize, "a longer prefix saved")

	r.ReportEvents(nil)
	require.NoError(t, saveLayers(ctx, w, req, 3*blockSize, 50, layerNames))
	assert.Empty(t, log.take(), "after ReportEvents(nil)")
}

// loadErrorsNamed checks the blocks a connector reports as failed: Damage
// breaks one layer of a stored prefix, and loading it must return a
// [kv.LoadError] for that layer whose blocks lie within the prefix
// and end with it, and that is a miss; the other layers still load.
func (s *suite) loadErrorsNamed(t *testing.T) {
	s.needWorker(t)
	if s.opts.Damage == nil {
		t.Skip("Options.Damage is not set")
	}
	extra := s.extra(t)
	cfg := s.config(blockSize, extra)
	w := s.worker(t, cfg)
	prefixes, err := cfg.Prefixes()
	require.NoError(t, err)
	ctx := t.Context()
	req := s.request(t, "damaged", 3*blockSize)
	n, base := 3*blockSize, 64
	require.NoError(t, saveLayers(ctx, w, req, n, base, layerNames))
	h, err := prefixes.Hash(req.PromptTokens, n)
	require.NoError(t, err)
	damaged := layerNames[1]
	s.opts.Damage(t, extra, h, damaged)

	_, err = w.LoadLayer(ctx, req, damaged, n)
	require.Error(t, err, "loading a damaged layer")
	assert.ErrorIs(t, err, kv.ErrMiss, "a damaged layer is a miss")
	var le *kv.LoadError
	require.True(t, errors.As(err, &le), "the error names the failed blocks: %v", err)
	assert.Equal(t, damaged, le.Layer)
	assert.Equal(t, blockSize, le.BlockSize)
	assert.Equal(t, n/blockSize, le.EndBlock, "the failed blocks end with the prefix")
	assert.True(t, le.FirstBlock >= 0 && le.FirstBlock < le.EndBlock, "blocks [%d, %d)", le.FirstBlock, le.EndBlock)
	assert.NoError(t, checkLayers(ctx, w, req, n, base, []string{layerNames[0]}), "an undamaged layer")

	if r, ok := w.(kv.StatsReporter); ok {
		r.KVStats()
		_, _ = w.LoadLayer(ctx, req, damaged, n)
		assert.Equal(t, uint64(1), r.KVStats().Total().Errors[kv.ErrorCorrupt], "a damaged layer counts as ErrorCorrupt")
	}
}
