package redis_test

import (
	"bytes"
	"fmt"
	"log/slog"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/external/redis"
	"github.com/kvgen/kvgen/registry/kv"
)

// openLoggedWorker creates the worker side as a host does, through a
// registry given the host's logger, and returns what is logged there: the
// connector's warnings reach it, not slog.Default.
func openLoggedWorker(t *testing.T, cfg kv.Config) (kv.Worker, *bytes.Buffer) {
	t.Helper()
	logs := new(bytes.Buffer)
	reg := kv.MustNew(kv.Entry{Name: "redis", Factory: redis.New}).
		WithLogger(slog.New(slog.NewTextHandler(logs, nil)))
	w, err := reg.CreateWorker(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, w.Close()) })
	return w, logs
}

// TestTamperedValuesAreMisses overwrites stored values behind the
// connector's back: whatever it finds, a load is a miss with a warning,
// never KV other than what was saved under that key.
func TestTamperedValuesAreMisses(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	raw := rawClient(t, srv.Addr())
	w, logs := openLoggedWorker(t, config("e", map[string]any{"addrs": []string{srv.Addr()}, "key_prefix": "kv:"}))
	ctx := t.Context()
	req := request("r", 9, 2*blockSize)

	key := func(numTokens int, layer string) string {
		h := prefixHash(t, "", req, numTokens)
		return "kv:{" + h.String() + "}:" + url.PathEscape(layer)
	}
	stored := func(numTokens int, layer string) []byte {
		v, err := raw.Get(ctx, key(numTokens, layer)).Bytes()
		require.NoError(t, err)
		return v
	}
	save(t, w, req, blockSize, "a", "b")
	save(t, w, req, 2*blockSize, "a")
	good := stored(2*blockSize, "a")

	flip := func(i int) []byte {
		v := bytes.Clone(good)
		v[i] ^= 0x01
		return v
	}
	for _, tc := range []struct {
		name   string
		value  []byte
		reason string
	}{
		{"foreign value", []byte("hello"), "not a value this connector wrote"},
		{"empty value", []byte{}, "not a value this connector wrote"},
		{"flipped KV bit", flip(len(good) - 1), "checksum mismatch"},
		{"flipped header bit", flip(10), "checksum mismatch"},
		{"truncated", good[:len(good)-7], "checksum mismatch"},
		{"extended", append(bytes.Clone(good), 0), "checksum mismatch"},
		{"another prefix's other layer", stored(blockSize, "b"), "another prefix"},
		{"same layer, another prefix", stored(blockSize, "a"), "another prefix"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			require.NoError(t, raw.Set(ctx, key(2*blockSize, "a"), tc.value, 0).Err())
			kvData, err := w.LoadLayer(ctx, req, "a", 2*blockSize)
			require.ErrorIs(t, err, kv.ErrMiss)
			assert.ErrorContains(t, err, tc.reason)
			assert.Nil(t, kvData)
			assert.Contains(t, logs.String(), "level=WARN")
			assert.Contains(t, logs.String(), key(2*blockSize, "a"), "the warning names the key")
			assert.Contains(t, logs.String(), "connector=redis role=worker", "the warning names the connector")
		})
	}

	t.Run("another layer of the same prefix", func(t *testing.T) {
		logs.Reset()
		require.NoError(t, raw.Set(ctx, key(blockSize, "a"), stored(blockSize, "b"), 0).Err())
		_, err := w.LoadLayer(ctx, req, "a", blockSize)
		require.ErrorIs(t, err, kv.ErrMiss)
		assert.ErrorContains(t, err, "another layer")
		assert.Contains(t, logs.String(), "level=WARN")
	})

	t.Run("saving again repairs the key", func(t *testing.T) {
		save(t, w, req, 2*blockSize, "a")
		kvData, err := w.LoadLayer(ctx, req, "a", 2*blockSize)
		require.NoError(t, err)
		assert.Equal(t, kvOf(req, "a", 2*blockSize), kvData)
	})

	t.Run("a plain miss is not a warning", func(t *testing.T) {
		logs.Reset()
		_, err := w.LoadLayer(ctx, req, "c", 2*blockSize)
		require.ErrorIs(t, err, kv.ErrMiss)
		assert.Empty(t, logs.String())
	})
}

// TestWrongTypeIsAMiss puts keys of other Redis types where the connector
// keeps a layer: a load is a miss with a warning, not an error, whether it
// reads the layer alone or with the prefix's other layers.
func TestWrongTypeIsAMiss(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	raw := rawClient(t, srv.Addr())
	ctx := t.Context()
	req := request("r", 4, blockSize)
	h := prefixHash(t, "", req, blockSize)
	key := "wt:{" + h.String() + "}:"
	for _, layers := range [][]string{nil, {"a", "b", "c"}} {
		t.Run(fmt.Sprintf("%d layer names", len(layers)), func(t *testing.T) {
			require.NoError(t, raw.FlushAll(ctx).Err())
			w, logs := openLoggedWorker(t, config("e", map[string]any{"addrs": []string{srv.Addr()}, "key_prefix": "wt:"}, layers...))
			save(t, w, req, blockSize, "b")
			require.NoError(t, raw.RPush(ctx, key+"a", "x").Err())
			require.NoError(t, raw.HSet(ctx, key+"c", "f", "v").Err())
			for _, l := range []string{"a", "c"} {
				kvData, err := w.LoadLayer(ctx, req, l, blockSize)
				require.ErrorIs(t, err, kv.ErrMiss, l)
				assert.ErrorContains(t, err, "the key holds another type")
				assert.Nil(t, kvData)
			}
			assert.Contains(t, logs.String(), "level=WARN")
			assert.Contains(t, logs.String(), key+"a")
			kvData, err := w.LoadLayer(ctx, req, "b", blockSize)
			require.NoError(t, err)
			assert.Equal(t, kvOf(req, "b", blockSize), kvData)
			// Saving over a key of another type replaces it.
			save(t, w, req, blockSize, "a")
			kvData, err = w.LoadLayer(ctx, req, "a", blockSize)
			require.NoError(t, err)
			assert.Equal(t, kvOf(req, "a", blockSize), kvData)
		})
	}
}
