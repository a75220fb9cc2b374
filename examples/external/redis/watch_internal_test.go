package redis

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// FuzzPrefixOf feeds notification payloads of any bytes to the key
// parser: it never panics, and accepts only keys of the connector's form,
// whose prefix hash it returns.
func FuzzPrefixOf(f *testing.F) {
	c := &connector{opts: Options{KeyPrefix: "kv:"}}
	h := kv.BlockHash{1, 2, 3}
	for _, seed := range []string{c.prefixKey(h), c.layerKey(h, "a/b"), "kv:{", "kv:{" + strings.Repeat("g", 64) + "}", "", "\xff{}:"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, key string) {
		got, ok := c.prefixOf(key)
		if !ok {
			return
		}
		marker := c.prefixKey(got)
		if !strings.EqualFold(key, marker) && !strings.HasPrefix(strings.ToLower(key), strings.ToLower(marker)+":") {
			t.Fatalf("%q parsed as the prefix %s", key, got)
		}
	})
}

// TestRemovedQueueIsBounded floods the watcher with removals of more
// prefixes than it queues: it queues maxPending and notes the overflow,
// which its checker reports as AllBlocksCleared, rather than grow.
func TestRemovedQueueIsBounded(t *testing.T) {
	p, err := kv.NewPrefixes("m", 1)
	require.NoError(t, err)
	c := &connector{opts: Options{KeyPrefix: "kv:"}, prefixes: p, held: p.HeldBlocks()}
	w := &watcher{c: c, pending: map[kv.BlockHash]struct{}{}, wake: make(chan struct{}, 1)}
	for i := range maxPending + 10 {
		tokens := []uint32{uint32(i)}
		c.held.Stored(tokens, kv.MediumRedis, nil)
		key := c.layerKey(p.Hashes(tokens)[0], "a")
		w.removed(key)
		w.removed(key) // each prefix is queued once
	}
	w.removed("kv:{" + strings.Repeat("z", 64) + "}:a") // not a key of the connector
	assert.Len(t, w.pending, maxPending)
	assert.True(t, w.overflow, "the removals beyond the bound are noted")
}

// A layer of n tokens may hold n times max_bytes_per_token, up to
// max_layer_bytes, with the value's header besides.
func TestValueLimit(t *testing.T) {
	c := &connector{opts: Options{MaxLayerBytes: 1000, MaxBytesPerToken: 300}}
	header := int64(fixedHeaderLen + len("layer"))
	for tokens, kvBytes := range map[int]int64{0: 0, 1: 300, 3: 900, 4: 1000, 1 << 30: 1000} {
		assert.Equal(t, header+kvBytes, c.valueLimit("layer", tokens), "%d tokens", tokens)
	}
}

// null is no value: the default addresses stay, as every setting's
// default does (an empty list is refused by its bound).
func TestNullAddressesKeepTheDefault(t *testing.T) {
	opts, err := decodeOptions(map[string]any{"addrs": nil})
	require.NoError(t, err)
	assert.Equal(t, DefaultOptions().Addrs, opts.Addrs)
	_, err = decodeOptions(map[string]any{"addrs": []any{}})
	require.ErrorContains(t, err, "addrs has 0 entries")
}
