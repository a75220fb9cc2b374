package conformance

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// roundTrip saves several prefixes of one prompt, from a byte per layer to
// about a mebibyte, loads every layer back byte for byte, and checks that
// the scheduler side reports the longest saved prefix.
func (s *suite) roundTrip(t *testing.T, bs int) {
	s.needWorker(t)
	ctx := t.Context()
	p := s.open(t, bs)
	// A trailing partial block, which no prefix covers.
	req := s.request(t, "prompt", 4*bs+bs/2)
	saves := []struct{ blocks, base int }{
		{1, 1},
		{3, 4096},
		{4, 1 << 20},
	}
	for _, sv := range saves {
		require.NoError(t, saveLayers(ctx, p.worker, req, sv.blocks*bs, sv.base, layerNames))
	}
	for _, sv := range saves {
		assert.NoError(t, checkLayers(ctx, p.worker, req, sv.blocks*bs, sv.base, layerNames))
	}
	if p.sched == nil {
		return
	}
	n, err := p.sched.MatchedTokens(ctx, req, 0)
	require.NoError(t, err)
	assert.Equal(t, 4*bs, n, "MatchedTokens must report the longest saved prefix of a %d-token prompt", len(req.PromptTokens))
	assert.NoError(t, p.sched.AfterAlloc(ctx, req, n))
	assert.NoError(t, p.sched.RequestFinished(ctx, req))
}

// miss checks that what was never saved is never promised nor returned.
func (s *suite) miss(t *testing.T) {
	t.Run("NeverSaved", func(t *testing.T) {
		ctx := t.Context()
		p := s.open(t, blockSize)
		if p.worker != nil {
			// Something is stored, so a connector that returns whatever
			// it holds is caught.
			other := s.request(t, "other", 3*blockSize)
			require.NoError(t, saveLayers(ctx, p.worker, other, 3*blockSize, 64, layerNames))
		}
		req := s.request(t, "never", 3*blockSize)
		s.requireMatched(t, p, req, 0, 0)
		if p.worker != nil {
			assertMiss(t, p.worker, req, blockSize, layerNames)
			assertMiss(t, p.worker, req, 3*blockSize, layerNames)
		}
		if p.sched != nil {
			assert.NoError(t, p.sched.AfterAlloc(ctx, req, 0))
			assert.NoError(t, p.sched.RequestFinished(ctx, req))
		}
	})
	// Keys must be chained hashes of the whole prefix: equal blocks at
	// the same place do not make equal prefixes.
	t.Run("DivergingPrompt", func(t *testing.T) {
		s.needWorker(t)
		ctx := t.Context()
		p := s.open(t, blockSize)
		saved := s.request(t, "saved", 3*blockSize)
		require.NoError(t, saveLayers(ctx, p.worker, saved, blockSize, 64, layerNames))
		require.NoError(t, saveLayers(ctx, p.worker, saved, 3*blockSize, 64, layerNames))

		laterDiffers := variant(saved, "later-differs", blockSize)
		s.requireMatched(t, p, laterDiffers, 0, blockSize)
		assert.NoError(t, checkLayers(ctx, p.worker, laterDiffers, blockSize, 64, layerNames),
			"a prompt that shares the first block shares its KV")
		assertMiss(t, p.worker, laterDiffers, 3*blockSize, layerNames)

		firstDiffers := variant(saved, "first-differs", 0)
		s.requireMatched(t, p, firstDiffers, 0, 0)
		assertMiss(t, p.worker, firstDiffers, blockSize, layerNames)
		assertMiss(t, p.worker, firstDiffers, 3*blockSize, layerNames)
	})
	// The engine loads every layer of what MatchedTokens promises.
	t.Run("PartialLayers", func(t *testing.T) {
		s.needWorker(t)
		ctx := t.Context()
		p := s.open(t, blockSize)
		req := s.request(t, "prompt", 3*blockSize)
		require.NoError(t, saveLayers(ctx, p.worker, req, blockSize, 64, layerNames))
		require.NoError(t, saveLayers(ctx, p.worker, req, 2*blockSize, 64, layerNames[:2]))
		require.NoError(t, saveLayers(ctx, p.worker, req, 3*blockSize, 64, []string{layerNames[0], layerNames[2]}))
		s.requireMatched(t, p, req, 0, blockSize)
		assert.NoError(t, checkLayers(ctx, p.worker, req, 2*blockSize, 64, layerNames[:2]))
		assertMiss(t, p.worker, req, 2*blockSize, layerNames[2:])
		assertMiss(t, p.worker, req, 3*blockSize, layerNames[1:2])
	})
}

// matchedTokens checks the arithmetic of MatchedTokens: block-aligned, no
// longer than the prompt, and net of the tokens already computed.
func (s *suite) matchedTokens(t *testing.T) {
	s.needWorker(t)
	if !s.serves(kv.RoleScheduler) {
		t.Skip("the connector does not serve the scheduler role")
	}
	ctx := t.Context()
	p := s.open(t, blockSize)
	req := s.request(t, "prompt", 5*blockSize+7)
	require.NoError(t, saveLayers(ctx, p.worker, req, 2*blockSize, 16, layerNames))
	require.NoError(t, saveLayers(ctx, p.worker, req, 5*blockSize, 16, layerNames))
	short := prefix(req, "short", 2*blockSize+8)
	tiny := prefix(req, "tiny", blockSize/2)
	for _, c := range []struct {
		req               *kv.Request
		numComputed, want int
	}{
		{req, 0, 5 * blockSize},
		{req, blockSize, 4 * blockSize},
		{req, 2 * blockSize, 3 * blockSize},
		{req, 4 * blockSize, blockSize},
		{req, 5 * blockSize, 0},
		{short, 0, 2 * blockSize},
		{short, blockSize, blockSize},
		{short, 2 * blockSize, 0},
		{tiny, 0, 0},
	} {
		s.requireMatched(t, p, c.req, c.numComputed, c.want)
	}

	// A prompt saved whole: vLLM's own connectors hold back the last block
	// so that the last token is computed, which the contract allows.
	whole := s.request(t, "whole", 3*blockSize)
	require.NoError(t, saveLayers(ctx, p.worker, whole, 2*blockSize, 16, layerNames))
	require.NoError(t, saveLayers(ctx, p.worker, whole, 3*blockSize, 16, layerNames))
	n := s.matched(t, p, whole, 0)
	assert.Contains(t, []int{2 * blockSize, 3 * blockSize}, n, "MatchedTokens of a prompt saved whole")
}

// saveRejectsBadPrefix checks that prefixes kv.CheckPrefix rejects
// are rejected by SaveLayer and LoadLayer, and that nothing is stored.
func (s *suite) saveRejectsBadPrefix(t *testing.T) {
	s.needWorker(t)
	ctx := t.Context()
	p := s.open(t, blockSize)
	req := s.request(t, "prompt", 2*blockSize+blockSize/2)
	layer := layerNames[0]
	data := kvBytes(req, 0, layer, 64)
	for _, n := range []int{0, -blockSize, blockSize / 2, blockSize + 1, len(req.PromptTokens), 3 * blockSize} {
		assert.Error(t, p.worker.SaveLayer(ctx, req, layer, n, data), "SaveLayer of a %d-token prefix of a %d-token prompt", n, len(req.PromptTokens))
		got, err := p.worker.LoadLayer(ctx, req, layer, n)
		assert.Error(t, err, "LoadLayer of a %d-token prefix of a %d-token prompt", n, len(req.PromptTokens))
		assert.Empty(t, got, "LoadLayer of a %d-token prefix returned data", n)
	}
	require.NoError(t, p.worker.WaitForSave(ctx))
	assertMiss(t, p.worker, req, blockSize, layerNames[:1])
	assertMiss(t, p.worker, req, 2*blockSize, layerNames[:1])
	s.requireMatched(t, p, req, 0, 0)
}

// noSharedSlices checks that the connector neither keeps the slice it was
// given nor hands out a slice it keeps. A save may finish in the
// background, but SaveLayer must not read data after it returns.
func (s *suite) noSharedSlices(t *testing.T) {
	s.needWorker(t)
	ctx := t.Context()
	p := s.open(t, blockSize)
	req := s.request(t, "prompt", 2*blockSize)
	layer := layerNames[1]
	want := kvBytes(req, 2*blockSize, layer, 4096)

	data := slices.Clone(want)
	require.NoError(t, p.worker.SaveLayer(ctx, req, layer, 2*blockSize, data))
	for i := range data {
		data[i] ^= 0xff
	}
	require.NoError(t, p.worker.WaitForSave(ctx))
	got, err := p.worker.LoadLayer(ctx, req, layer, 2*blockSize)
	require.NoError(t, err)
	require.Empty(t, diffBytes(want, got), "changing the saved slice after SaveLayer changed what LoadLayer returns")

	for i := range got {
		got[i] ^= 0xff
	}
	again, err := p.worker.LoadLayer(ctx, req, layer, 2*blockSize)
	require.NoError(t, err)
	assert.Empty(t, diffBytes(want, again), "changing a loaded slice changed what the next LoadLayer returns")
}

// concurrent saves and loads different requests from many goroutines, each
// checking its own bytes; the race detector checks the rest.
func (s *suite) concurrent(t *testing.T) {
	s.needWorker(t)
	const goroutines, perGoroutine = 8, 20
	ctx := t.Context()
	p := s.open(t, blockSize)
	type job struct {
		req             *kv.Request
		numTokens, base int
	}
	jobs := make([][]job, goroutines)
	for g := range jobs {
		for i := range perGoroutine {
			blocks := 1 + (g+i)%4
			jobs[g] = append(jobs[g], job{
				req:       s.request(t, fmt.Sprintf("g%d-r%d", g, i), blocks*blockSize+i%3),
				numTokens: blocks * blockSize,
				base:      256 + 128*((g*perGoroutine+i)%8),
			})
		}
	}
	errs := make([]error, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			var gerrs []error
			for i, j := range jobs[g] {
				if err := saveLayers(ctx, p.worker, j.req, j.numTokens, j.base, layerNames); err != nil {
					gerrs = append(gerrs, err)
					continue
				}
				// Load this request and the previous one while other
				// goroutines save theirs.
				for _, k := range jobs[g][max(i-1, 0) : i+1] {
					if err := checkLayers(ctx, p.worker, k.req, k.numTokens, k.base, layerNames); err != nil {
						gerrs = append(gerrs, err)
					}
				}
				if p.sched == nil {
					continue
				}
				n, err := p.sched.MatchedTokens(ctx, j.req, 0)
				if err != nil || n != j.numTokens {
					gerrs = append(gerrs, fmt.Errorf("MatchedTokens(%s) = %d, %v; want %d", j.req.ID, n, err, j.numTokens))
				}
			}
			errs[g] = errors.Join(gerrs...)
		})
	}
	wg.Wait()
	for g, err := range errs {
		assert.NoError(t, err, "goroutine %d", g)
	}
}

// matched calls MatchedTokens and checks what holds for every answer.
func (s *suite) matched(t *testing.T, p pair, req *kv.Request, numComputed int) int {
	t.Helper()
	n, err := p.sched.MatchedTokens(t.Context(), req, numComputed)
	require.NoError(t, err, "MatchedTokens(%s, %d)", req.ID, numComputed)
	require.GreaterOrEqual(t, n, 0, "MatchedTokens(%s, %d) is negative", req.ID, numComputed)
	if n > 0 {
		promised := numComputed + n
		require.LessOrEqual(t, promised, len(req.PromptTokens),
			"MatchedTokens(%s, %d) = %d promises more tokens than the prompt has", req.ID, numComputed, n)
		require.Zero(t, promised%blockSize,
			"MatchedTokens(%s, %d) = %d promises a prefix of %d tokens, not aligned to the block size %d", req.ID, numComputed, n, promised, blockSize)
	}
	return n
}

// requireMatched checks MatchedTokens against the expected answer, if the
// connector serves the scheduler role.
func (s *suite) requireMatched(t *testing.T, p pair, req *kv.Request, numComputed, want int) {
	t.Helper()
	if p.sched == nil {
		return
	}
	require.Equal(t, want, s.matched(t, p, req, numComputed),
		"MatchedTokens(%s, numComputed %d) of a %d-token prompt", req.ID, numComputed, len(req.PromptTokens))
}

// assertMiss checks that none of layers is stored for the prefix: the error
// wraps kv.ErrMiss and no data comes with it.
func assertMiss(t *testing.T, w kv.Worker, req *kv.Request, numTokens int, layers []string) {
	t.Helper()
	for _, l := range layers {
		data, err := w.LoadLayer(t.Context(), req, l, numTokens)
		assert.ErrorIs(t, err, kv.ErrMiss, "LoadLayer(%s, %q, %d tokens) of KV never saved", req.ID, l, numTokens)
		assert.Empty(t, data, "LoadLayer(%s, %q, %d tokens) returned data with a miss", req.ID, l, numTokens)
	}
}

// variant returns a copy of req whose token at index i differs.
func variant(req *kv.Request, tag string, i int) *kv.Request {
	tokens := slices.Clone(req.PromptTokens)
	tokens[i]++
	return &kv.Request{ID: req.ID + "/" + tag, PromptTokens: tokens}
}

// prefix returns a request whose prompt is the first n tokens of req's.
func prefix(req *kv.Request, tag string, n int) *kv.Request {
	return &kv.Request{ID: req.ID + "/" + tag, PromptTokens: slices.Clone(req.PromptTokens[:n])}
}

// isolatedByModel checks that KV is only ever served to the model that
// computed it: engines of two models share one store (the same settings),
// differ only in Config.Model, and save the same prompt. Each sees its own
// KV and never the other's.
func (s *suite) isolatedByModel(t *testing.T) {
	s.needWorker(t)
	ctx := t.Context()
	extra := s.extra(t)
	cfgA, cfgB := s.config(blockSize, extra), s.config(blockSize, extra)
	cfgA.Model, cfgB.Model = "org/model-a", "org/model-b"
	a, b := s.openFrom(t, cfgA), s.openFrom(t, cfgB)
	req := s.request(t, "prompt", 3*blockSize+5)

	require.NoError(t, saveLayers(ctx, a.worker, req, blockSize, 64, layerNames))
	require.NoError(t, saveLayers(ctx, a.worker, req, 3*blockSize, 64, layerNames))
	s.requireMatched(t, b, req, 0, 0)
	assertMiss(t, b.worker, req, blockSize, layerNames)
	assertMiss(t, b.worker, req, 3*blockSize, layerNames)

	// The other model saves the same prompt with its own KV (other
	// lengths, so a mix-up cannot compare equal); neither overwrites the
	// other.
	require.NoError(t, saveLayers(ctx, b.worker, req, 3*blockSize, 300, layerNames))
	s.requireMatched(t, a, req, 0, 3*blockSize)
	s.requireMatched(t, b, req, 0, 3*blockSize)
	assert.NoError(t, checkLayers(ctx, a.worker, req, 3*blockSize, 64, layerNames), "model a's KV")
	assert.NoError(t, checkLayers(ctx, b.worker, req, 3*blockSize, 300, layerNames), "model b's KV")
	assert.NoError(t, checkLayers(ctx, a.worker, req, blockSize, 64, layerNames), "model a's shorter prefix")
	assertMiss(t, b.worker, req, blockSize, layerNames)
}
