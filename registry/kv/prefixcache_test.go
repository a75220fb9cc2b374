package kv_test

import (
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

func TestPrefixCacheMatchesPrefixes(t *testing.T) {
	tokens := []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}
	for _, model := range []string{"", "llama"} {
		for _, bs := range []int{2, 4, 8} {
			p, err := kv.NewPrefixes(model, bs)
			require.NoError(t, err)
			c := p.Cache()
			check := func(tokens []uint32, n int) {
				t.Helper()
				want, wantErr := p.Hash(tokens, n)
				got, err := c.Hash(tokens, n)
				assert.Equal(t, wantErr, err)
				assert.Equal(t, want, got, "model %q, block size %d, tokens %v, %d tokens", model, bs, tokens, n)
			}
			for range 2 { // computed, then remembered
				check(tokens, bs)
				check(tokens, 8)
			}
			check(tokens, bs+1)
			check(tokens, 16)
			check(tokens, 0)

			// The same slice changed in place is a different prompt.
			before, err := c.Hash(tokens, 8)
			require.NoError(t, err)
			tokens[5]++
			check(tokens, 8)
			after, err := c.Hash(tokens, 8)
			require.NoError(t, err)
			assert.NotEqual(t, before, after)
			tokens[5]--
			check(tokens, 8)

			// More prompts than it remembers.
			for i := range 20 {
				check(append(slices.Clone(tokens), uint32(i)), 8)
			}
		}
	}
}

// Caches of two models never answer for each other.
func TestPrefixCacheKeepsModelsApart(t *testing.T) {
	a, err := kv.NewPrefixes("model-a", 4)
	require.NoError(t, err)
	b, err := kv.NewPrefixes("model-b", 4)
	require.NoError(t, err)
	tokens := []uint32{1, 2, 3, 4}
	ha, err := a.Cache().Hash(tokens, 4)
	require.NoError(t, err)
	hb, err := b.Cache().Hash(tokens, 4)
	require.NoError(t, err)
	assert.NotEqual(t, ha, hb)
}

func TestPrefixCacheConcurrent(t *testing.T) {
	p, err := kv.NewPrefixes("", 4)
	require.NoError(t, err)
	c := p.Cache()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			// assert, not require: FailNow must not run off the test's
			// goroutine.
			tokens := []uint32{uint32(g), 1, 2, 3, 4, 5, 6, 7}
			want, err := p.Hash(tokens, 8)
			if !assert.NoError(t, err) {
				return
			}
			for range 100 {
				got, err := c.Hash(tokens, 8)
				if !assert.NoError(t, err) || !assert.Equal(t, want, got) {
					return
				}
			}
		})
	}
	wg.Wait()
}
