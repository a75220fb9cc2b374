package conformance

import (
	"errors"
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
