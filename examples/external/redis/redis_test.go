package redis_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/external/redis"
	"github.com/kvgen/kvgen/examples/external/redis/internal/redistest"
	"github.com/kvgen/kvgen/registry/kv"
)

const blockSize = 4

func config(engineID string, extra map[string]any, layers ...string) kv.Config {
	return kv.Config{
		Connector:         "redis",
		EngineID:          engineID,
		KVRole:            kv.KVBoth,
		BlockSize:         blockSize,
		LayerNames:        layers,
		LoadFailurePolicy: kv.PolicyRecompute,
		Extra:             extra,
	}
}

// prefixHash is the hash a connector of model keys the first numTokens
// tokens of req by.
func prefixHash(t testing.TB, model string, req *kv.Request, numTokens int) kv.BlockHash {
	t.Helper()
	p, err := kv.NewPrefixes(model, blockSize)
	require.NoError(t, err)
	h, err := p.Hash(req.PromptTokens, numTokens)
	require.NoError(t, err)
	return h
}

func open(t testing.TB, cfg kv.Config, role kv.Role) kv.Connector {
	t.Helper()
	c, err := redis.New(t.Context(), cfg, role)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, c.Close()) })
	return c
}

func openWorker(t testing.TB, cfg kv.Config) kv.Worker {
	t.Helper()
	w, ok := open(t, cfg, kv.RoleWorker).(kv.Worker)
	require.True(t, ok, "a worker-role connector implements kv.Worker")
	return w
}

func openScheduler(t testing.TB, cfg kv.Config) kv.Scheduler {
	t.Helper()
	s, ok := open(t, cfg, kv.RoleScheduler).(kv.Scheduler)
	require.True(t, ok, "a scheduler-role connector implements kv.Scheduler")
	return s
}

// rawClient talks to the server directly, to look at and tamper with keys.
func rawClient(t testing.TB, addr string) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(&goredis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// request returns a request whose prompt has n tokens that depend on seed.
func request(id string, seed uint32, n int) *kv.Request {
	tokens := make([]uint32, n)
	for i := range tokens {
		tokens[i] = seed*1000 + uint32(i)
	}
	return &kv.Request{ID: id, PromptTokens: tokens}
}

// kvOf returns made-up KV bytes that differ for every prompt, layer and
// prefix length, so that a load returning another key's value shows.
func kvOf(req *kv.Request, layer string, numTokens int) []byte {
	h := sha256.New()
	for _, tok := range req.PromptTokens[:numTokens] {
		_ = binary.Write(h, binary.LittleEndian, tok)
	}
	fmt.Fprintf(h, "|%s|%d", layer, numTokens)
	sum := h.Sum(nil)
	out := make([]byte, 0, 64*len(sum))
	for range 64 {
		out = append(out, sum...)
	}
	return out
}

func save(t testing.TB, w kv.Worker, req *kv.Request, numTokens int, layers ...string) {
	t.Helper()
	for _, l := range layers {
		require.NoError(t, w.SaveLayer(t.Context(), req, l, numTokens, kvOf(req, l, numTokens)))
	}
	require.NoError(t, w.WaitForSave(t.Context()))
}

func TestSharedAcrossEngines(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	extra := map[string]any{"addrs": []string{srv.Addr()}}
	layers := []string{"layers.0", "layers.1", "layers.2"}
	prefill := openWorker(t, config("prefill-0", extra, layers...))
	sched := openScheduler(t, config("decode-0", extra, layers...))
	decode := openWorker(t, config("decode-0", extra, layers...))
	ctx := t.Context()

	req := request("r1", 1, 3*blockSize+1)
	n, err := sched.MatchedTokens(ctx, req, 0)
	require.NoError(t, err)
	assert.Zero(t, n, "nothing is stored yet")

	kvData := kvOf(req, "layers.0", 2*blockSize)
	require.NoError(t, prefill.SaveLayer(ctx, req, "layers.0", 2*blockSize, kvData))
	clear(kvData) // the connector must not keep the caller's slice
	save(t, prefill, req, 2*blockSize, "layers.1", "layers.2")
	require.NoError(t, prefill.WaitForSave(ctx))

	// The decode engine has another engine id and sees the same KV under
	// a request id of its own.
	again := request("decode-r1", 1, 3*blockSize+1)
	n, err = sched.MatchedTokens(ctx, again, 0)
	require.NoError(t, err)
	assert.Equal(t, 2*blockSize, n)
	for _, l := range layers {
		got, err := decode.LoadLayer(ctx, again, l, 2*blockSize)
		require.NoError(t, err, l)
		assert.Equal(t, kvOf(req, l, 2*blockSize), got, l)
	}

	_, err = decode.LoadLayer(ctx, again, "layers.0", blockSize)
	require.ErrorIs(t, err, kv.ErrMiss, "a shorter prefix is another key")
	_, err = decode.LoadLayer(ctx, request("r2", 2, 3*blockSize), "layers.0", 2*blockSize)
	require.ErrorIs(t, err, kv.ErrMiss, "another prompt is another key")
}

func TestMatchedTokensWantsEveryLayer(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	extra := map[string]any{"addrs": []string{srv.Addr()}}
	// A layer listed twice must not stop prefixes from matching.
	cfg := config("e", extra, "a", "b", "c", "a")
	w := openWorker(t, cfg)
	s := openScheduler(t, cfg)
	ctx := t.Context()
	req := request("r", 7, 4*blockSize+2) // ends in a partial block

	matched := func(numComputed int) int {
		t.Helper()
		n, err := s.MatchedTokens(ctx, req, numComputed)
		require.NoError(t, err)
		return n
	}

	save(t, w, req, blockSize, "a", "b", "c")
	save(t, w, req, 3*blockSize, "a", "b")
	assert.Equal(t, blockSize, matched(0), "the 3-block prefix lacks layer c")
	assert.Zero(t, matched(blockSize), "nothing complete beyond what is computed")

	save(t, w, req, 3*blockSize, "c")
	assert.Equal(t, 3*blockSize, matched(0), "the longest complete prefix wins")
	assert.Equal(t, 2*blockSize, matched(blockSize))
	assert.Equal(t, 3*blockSize-5, matched(5), "an unaligned count still ends the prefix on a block")
	assert.Zero(t, matched(3*blockSize))
	assert.Zero(t, matched(len(req.PromptTokens)))

	save(t, w, req, 4*blockSize, "a", "b", "c")
	assert.Equal(t, 4*blockSize, matched(0), "the partial last block is never promised")

	_, err := s.MatchedTokens(ctx, req, -1)
	require.Error(t, err)
}

func TestMatchedTokensWithoutLayerNames(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	extra := map[string]any{"addrs": []string{srv.Addr()}}
	w := openWorker(t, config("prefill", extra))
	s := openScheduler(t, config("decode", extra))
	req := request("r", 3, 2*blockSize)

	n, err := s.MatchedTokens(t.Context(), req, 0)
	require.NoError(t, err)
	assert.Zero(t, n)

	save(t, w, req, 2*blockSize, "any-layer")
	n, err = s.MatchedTokens(t.Context(), req, 0)
	require.NoError(t, err)
	assert.Equal(t, 2*blockSize, n, "without layer names, one stored layer makes a prefix")
}

func TestKeyLayout(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	extra := map[string]any{"addrs": []string{srv.Addr()}, "key_prefix": "team-a:"}
	w := openWorker(t, config("engine-7", extra))
	raw := rawClient(t, srv.Addr())
	ctx := t.Context()
	req := request("r", 4, 2*blockSize)
	layers := []string{"model.layers.0", "a/b", "a%2Fb", "x:{y} z"}
	save(t, w, req, 2*blockSize, layers...)

	h := prefixHash(t, "", req, 2*blockSize)
	want := []string{"team-a:{" + h.String() + "}"}
	for _, l := range layers {
		want = append(want, "team-a:{"+h.String()+"}:"+url.PathEscape(l))
	}
	keys, err := raw.Keys(ctx, "*").Result()
	require.NoError(t, err)
	assert.ElementsMatch(t, want, keys, "the documented key layout")
	for _, k := range keys {
		assert.NotContains(t, k, "engine-7", "keys must not depend on the engine")
	}
	for _, l := range layers {
		got, err := w.LoadLayer(ctx, req, l, 2*blockSize)
		require.NoError(t, err, l)
		assert.Equal(t, kvOf(req, l, 2*blockSize), got, "layer %q", l)
	}
}

func TestTTL(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	raw := rawClient(t, srv.Addr())
	req := request("r", 5, blockSize)
	for _, tc := range []struct {
		ttl  any
		want time.Duration // 0: no expiry
	}{
		{ttl: "1h", want: time.Hour},
		{ttl: 90, want: 90 * time.Second},
		{ttl: "0s"},
	} {
		t.Run(fmt.Sprint(tc.ttl), func(t *testing.T) {
			prefix := "ttl-" + fmt.Sprint(tc.ttl) + ":"
			w := openWorker(t, config("e", map[string]any{"addrs": []string{srv.Addr()}, "key_prefix": prefix, "ttl": tc.ttl}))
			save(t, w, req, blockSize, "l")
			keys, err := raw.Keys(t.Context(), prefix+"*").Result()
			require.NoError(t, err)
			require.Len(t, keys, 2, "the layer and its prefix marker")
			for _, k := range keys {
				left, err := raw.PTTL(t.Context(), k).Result()
				require.NoError(t, err)
				if tc.want == 0 {
					assert.Equal(t, time.Duration(-1), left, "%s has no expiry", k)
					continue
				}
				assert.Positive(t, left, k)
				assert.LessOrEqual(t, left, tc.want, k)
			}
		})
	}
}

func TestContextIsHonoured(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	w := openWorker(t, config("e", map[string]any{"addrs": []string{srv.Addr()}}, "l"))
	s := openScheduler(t, config("e", map[string]any{"addrs": []string{srv.Addr()}}, "l"))
	req := request("r", 6, blockSize)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()

	err := w.SaveLayer(ctx, req, "l", blockSize, []byte("kv"))
	require.ErrorIs(t, err, context.Canceled)
	_, err = w.LoadLayer(ctx, req, "l", blockSize)
	require.ErrorIs(t, err, context.Canceled)
	assert.NotErrorIs(t, err, kv.ErrMiss, "a cancelled load is not a miss")
	_, err = s.MatchedTokens(ctx, req, 0)
	require.ErrorIs(t, err, context.Canceled)
}

func TestClose(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	c, err := redis.New(t.Context(), config("e", map[string]any{"addrs": []string{srv.Addr()}}), kv.RoleWorker)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	require.NoError(t, c.Close(), "Close is idempotent")
	err = c.(kv.Worker).SaveLayer(t.Context(), request("r", 1, blockSize), "l", blockSize, []byte("kv"))
	require.ErrorIs(t, err, goredis.ErrClosed)
}

// Settings reach errors quoted: an escape sequence or a newline in an
// address or a file name neither reaches a terminal raw nor forges a line.
// A host name with a control character is no host name.
func TestUserStringsAreQuotedInErrors(t *testing.T) {
	t.Parallel()
	const evil = "\x1b[2J\nkvserver: forged error"
	for name, extra := range map[string]map[string]any{
		"address":     {"addrs": []string{"a\x1b[2J\nforged:6379"}, "dial_timeout": "1ms"},
		"URL scheme":  {"addrs": []string{"x" + evil + "://h:1"}},
		"CA file":     {"tls": map[string]any{"ca_file": evil}},
		"master name": {"master_name": evil, "addrs": []string{"127.0.0.1:1"}, "dial_timeout": "1ms"},
	} {
		_, err := redis.New(t.Context(), config("e", extra), kv.RoleWorker)
		require.Error(t, err, name)
		assert.NotContains(t, err.Error(), "\n", name)
		assert.NotContains(t, err.Error(), "\x1b", name)
	}
}

// A thousand bad addresses are reported as the first kv.MaxProblems
// and a count of the rest, not a thousand lines.
func TestInvalidSettingsAreBounded(t *testing.T) {
	t.Parallel()
	addrs := make([]string, 1000)
	for i := range addrs {
		addrs[i] = "no-port"
	}
	_, err := redis.New(t.Context(), config("e", map[string]any{"addrs": addrs, "cluster": true}), kv.RoleWorker)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, kv.MaxProblems+1)
	assert.Equal(t, `kv_connector_extra_config: addrs[0] "no-port": want host:port`, lines[0])
	assert.Equal(t, "... and 990 more problems", lines[kv.MaxProblems])
}

func TestInvalidSettings(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  []string
	}{
		{"unknown key", map[string]any{"adrs": []string{"127.0.0.1:6379"}}, []string{`unknown key "adrs" (did you mean "addrs"?)`}},
		{"misspelt prefix", map[string]any{"key_prefx": "x:"}, []string{`unknown key "key_prefx" (did you mean "key_prefix"?)`}},
		{"bad duration", map[string]any{"ttl": "5 minutes"}, []string{`duration "5 minutes"`, `"500ms"`}},
		{"duration of the wrong type", map[string]any{"dial_timeout": true}, []string{"duration true"}},
		{"no address", map[string]any{"addrs": []string{}}, []string{"addrs has 0 entries: want from 1 to 1000"}},
		{"empty address", map[string]any{"addrs": []string{"127.0.0.1:6379", " "}}, []string{"addrs[1] is empty"}},
		{"negative ttl", map[string]any{"ttl": "-1s"}, []string{"ttl -1s: want at least 1ms, or 0 for no expiry"}},
		{"ttl under a millisecond", map[string]any{"ttl": "10us"}, []string{"ttl 10µs"}},
		{"ttl of a fraction of a millisecond in seconds", map[string]any{"ttl": 0.0005}, []string{"ttl 500µs: want at least 1ms"}},
		{"ttl that rounds to nothing", map[string]any{"ttl": 1e-12}, []string{"ttl: duration 1e-12 seconds: rounds to zero"}},
		{"ttl too long for a duration", map[string]any{"ttl": 1e20}, []string{"ttl: duration 100000000000000000000 seconds: out of range"}},
		{"ttl too long as a string", map[string]any{"ttl": "3000000h"}, []string{`ttl: duration "3000000h": out of range`}},
		{"zero timeout", map[string]any{"read_timeout": 0}, []string{"read_timeout 0s: want from 1ms to 1h"}},
		{"database in a cluster", map[string]any{"addrs": []string{"10.0.0.1:6379", "10.0.0.2:6379"}, "db": 1}, []string{"db 1: a Redis Cluster"}},
		{"every problem at once", map[string]any{"db": -1, "pool_size": -2}, []string{"db -1: want from 0 to 2147483647", "pool_size -2: want from 0 to 10000"}},
		// go-redis allocates for the whole pool when the client is made.
		{"huge pool", map[string]any{"pool_size": 1 << 30}, []string{"pool_size 1073741824: want from 0 to 10000"}},
		{"timeout of centuries", map[string]any{"dial_timeout": 9e9}, []string{"dial_timeout 2500000h0m0s: want from 1ms to 1h"}},
		{"huge key prefix", map[string]any{"key_prefix": strings.Repeat("k", 1025)}, []string{"key_prefix has 1025 bytes: want at most 1024"}},
		{"hash tag in the key prefix", map[string]any{"key_prefix": "p{}", "cluster": true}, []string{`key_prefix "p{}": holds a brace`}},
		{"brace in the key prefix", map[string]any{"key_prefix": "team}"}, []string{`key_prefix "team}": holds a brace`}},
		{"database in an explicit cluster", map[string]any{"cluster": true, "db": 2}, []string{"db 2: a Redis Cluster has only database 0"}},
		{"cluster and sentinel", map[string]any{"cluster": true, "master_name": "m"}, []string{"cluster and master_name"}},
		{"cluster of the wrong type", map[string]any{"cluster": "yes"}, []string{"cluster"}},
		{"address without port", map[string]any{"addrs": []string{"redis-0"}}, []string{`addrs[0] "redis-0": want host:port`}},
		{"port out of range", map[string]any{"addrs": []string{"redis-0:70000"}}, []string{`port "70000": want 1 to 65535`}},
		{"other scheme", map[string]any{"addrs": []string{"http://redis-0:6379"}}, []string{`scheme "http": want redis:// or rediss://`}},
		{"credentials in the address", map[string]any{"addrs": []string{"rediss://u:secret@redis-0:6380"}}, []string{"credentials, database and options go in username, password, db"}},
		{"database in the address", map[string]any{"addrs": []string{"redis://redis-0:6379/3"}}, []string{"want only scheme, host and port"}},
		{"mixed schemes", map[string]any{"addrs": []string{"redis://a:1", "rediss://b:2"}}, []string{"redis:// and rediss:// addresses mixed"}},
		{"unknown tls key", map[string]any{"tls": map[string]any{"ca_fil": "ca.pem"}}, []string{`kv_connector_extra_config: tls: unknown key "ca_fil" (did you mean "ca_file"?)`}},
		{"tls of the wrong type", map[string]any{"tls": true}, []string{"tls"}},
		{"client certificate without key", map[string]any{"tls": map[string]any{"cert_file": "c.pem"}}, []string{"tls: cert_file and key_file go together"}},
		{"missing CA file", map[string]any{"tls": map[string]any{"ca_file": "/nonexistent/ca.pem"}}, []string{`tls: ca_file: open "/nonexistent/ca.pem": no such file`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := redis.New(t.Context(), config("e", tc.extra), kv.RoleWorker)
			require.Error(t, err)
			for _, w := range tc.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}

	t.Run("block size", func(t *testing.T) {
		for _, bs := range []int{0, kv.MaxBlockSize + 1, math.MaxInt} {
			cfg := config("e", nil)
			cfg.BlockSize = bs
			_, err := redis.New(t.Context(), cfg, kv.RoleWorker)
			require.EqualError(t, err, fmt.Sprintf("block size %d: want a number of tokens from 1 to 65536", bs))
		}
	})
	t.Run("role", func(t *testing.T) {
		_, err := redis.New(t.Context(), config("e", nil), kv.Role(0))
		require.ErrorContains(t, err, "invalid role")
	})
}

func TestUnreachableServer(t *testing.T) {
	t.Parallel()
	addr := fmt.Sprintf("127.0.0.1:%d", redistest.FreePort(t)) // nothing listens there
	_, err := redis.New(t.Context(), config("e", map[string]any{"addrs": []string{addr}, "dial_timeout": "2s"}), kv.RoleScheduler)
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "redis at "+addr+": "), "error names the server: %v", err)
	assert.Contains(t, err.Error(), "connection refused")
}

// TestReadAhead checks what the first load of a prefix fetches for the
// loads after it: each layer handed out as saved, a layer saved again
// afterwards loaded anew, a miss kept a miss, and nothing held once the
// request is finished.
func TestReadAhead(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	raw := rawClient(t, srv.Addr())
	layers := []string{"a", "b", "c", "d"}
	w := openWorker(t, config("e", map[string]any{"addrs": []string{srv.Addr()}, "key_prefix": "ra:"}, layers...))
	ctx := t.Context()
	req := request("r", 5, blockSize)
	save(t, w, req, blockSize, "a", "b", "c")

	load := func(layer string) ([]byte, error) { return w.LoadLayer(ctx, req, layer, blockSize) }
	kvData, err := load("a") // reads b, c and d ahead
	require.NoError(t, err)
	assert.Equal(t, kvOf(req, "a", blockSize), kvData)

	newer := []byte("saved again")
	require.NoError(t, w.SaveLayer(ctx, req, "b", blockSize, newer))
	require.NoError(t, w.WaitForSave(ctx))
	kvData, err = load("b")
	require.NoError(t, err)
	assert.Equal(t, newer, kvData, "a layer saved after the read ahead is loaded anew")

	// Deleted behind the connector's back after the read ahead: the
	// value read ahead is still the one saved under that key.
	require.NoError(t, raw.FlushAll(ctx).Err())
	kvData, err = load("c")
	require.NoError(t, err)
	assert.Equal(t, kvOf(req, "c", blockSize), kvData)
	_, err = load("d")
	require.ErrorIs(t, err, kv.ErrMiss, "d was never saved")

	// Every layer was handed out once: loading again asks Redis.
	_, err = load("a")
	require.ErrorIs(t, err, kv.ErrMiss, "a is gone from the server")

	save(t, w, req, blockSize, "a", "b")
	_, err = load("a") // reads b ahead
	require.NoError(t, err)
	require.NoError(t, raw.FlushAll(ctx).Err())
	_, _, err = w.Finished(ctx, []string{req.ID})
	require.NoError(t, err)
	_, err = load("b")
	require.ErrorIs(t, err, kv.ErrMiss, "a finished request's read ahead is dropped")
}

// TestLargeLayers saves layers big enough to be written in the
// background, more of them than may be written at once: WaitForSave
// returns once all are stored, and reports a write that failed after
// SaveLayer returned.
func TestLargeLayers(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	layers := []string{"0", "1", "2", "3", "4", "5", "6", "7"}
	cfg := config("e", map[string]any{"addrs": []string{srv.Addr()}, "read_timeout": "1s", "write_timeout": "1s", "dial_timeout": "1s", "max_bytes_per_token": 1 << 30}, layers...)
	w := openWorker(t, cfg)
	ctx := t.Context()
	req := request("big", 8, blockSize)
	big := func(l string) []byte {
		kvData := bytes.Repeat(kvOf(req, l, blockSize), (9<<20)/2048+1)
		require.Greater(t, len(kvData), 9<<20)
		return kvData
	}
	for _, l := range layers {
		kvData := big(l)
		require.NoError(t, w.SaveLayer(ctx, req, l, blockSize, kvData))
		clear(kvData) // the connector must have copied it
	}
	require.NoError(t, w.WaitForSave(ctx))
	for _, l := range layers {
		kvData, err := w.LoadLayer(ctx, req, l, blockSize)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(big(l), kvData), "layer %s loads as saved", l)
	}

	srv.Kill()
	require.NoError(t, w.SaveLayer(ctx, request("down", 9, blockSize), "0", blockSize, big("0")), "written in the background")
	err := w.WaitForSave(ctx)
	requireOutage(t, err, srv.Addr())
	require.NoError(t, w.WaitForSave(ctx), "a failure is reported once")
}

// A value another client stored under a layer's key, larger than a layer
// of the request's tokens may be, is a miss read no further than that
// bound: a load allocates what the settings allow, not what the server
// holds. A save past the bound is refused.
func TestOversizedValuesAreReadNoFurther(t *testing.T) {
	srv := startRedis(t)
	raw := rawClient(t, srv.Addr())
	const perToken = 1024
	w := openWorker(t, config("e", map[string]any{"addrs": []string{srv.Addr()}, "key_prefix": "big:", "max_bytes_per_token": perToken}, "a", "b"))
	ctx := t.Context()
	req := request("r", 3, blockSize)
	h := prefixHash(t, "", req, blockSize)
	for _, l := range []string{"a", "b"} {
		require.NoError(t, raw.SetRange(ctx, "big:{"+h.String()+"}:"+l, 64<<20-1, "x").Err())
	}

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := w.LoadLayer(ctx, req, "a", blockSize) // and "b", read ahead
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, kv.ErrMiss)
	require.ErrorContains(t, err, fmt.Sprintf("a layer of %d tokens may hold (max_layer_bytes 536805376, max_bytes_per_token %d); read no further", blockSize, perToken))
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20), "a load of two layers of 64 MiB allocated as if it read them")

	err = w.SaveLayer(ctx, req, "a", blockSize, make([]byte, blockSize*perToken+1))
	require.ErrorContains(t, err, fmt.Sprintf("%d bytes of KV, more than max_layer_bytes (536805376) or max_bytes_per_token (%d) allow", blockSize*perToken+1, perToken))
	require.NoError(t, w.SaveLayer(ctx, req, "a", blockSize, make([]byte, blockSize*perToken)))
}
