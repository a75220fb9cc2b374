package redis_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/kv"
)

// TestRedisRestart kills redis-server while the connector is in use and
// starts it again, empty, on the same port: while it is down every call
// fails with an error rather than a miss, and afterwards the same
// connectors work again without ever returning KV that was not saved under
// the key asked for.
func TestRedisRestart(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	addr := srv.Addr()
	cfg := config("e", map[string]any{
		"addrs":         []string{addr},
		"dial_timeout":  "1s",
		"read_timeout":  "1s",
		"write_timeout": "1s",
	}, "a", "b")
	w := openWorker(t, cfg)
	s := openScheduler(t, cfg)
	// The background traffic has its own worker, so that its WaitForSave
	// cannot report, and so take, the failures of this test's saves.
	bg := openWorker(t, cfg)

	before := request("before", 1, 2*blockSize)
	save(t, w, before, 2*blockSize, "a", "b")
	n, err := s.MatchedTokens(t.Context(), before, 0)
	require.NoError(t, err)
	require.Equal(t, 2*blockSize, n)

	// Traffic that runs through the outage: a load may fail, but one that
	// succeeds must return exactly the KV of its key.
	var (
		stop      = make(chan struct{})
		done      sync.WaitGroup
		loaded    atomic.Int64
		wrongData atomic.Int64
	)
	done.Go(func() {
		repeat(stop, func(i int) {
			req := request(fmt.Sprint("bg-", i), uint32(100+i%5), blockSize)
			want := kvOf(req, "a", blockSize)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = bg.SaveLayer(ctx, req, "a", blockSize, want)
			_ = bg.WaitForSave(ctx)
			kvData, err := bg.LoadLayer(ctx, req, "a", blockSize)
			cancel()
			switch {
			case err == nil && bytes.Equal(kvData, want):
				loaded.Add(1)
			case err == nil, kvData != nil:
				wrongData.Add(1)
			}
		})
	})

	srv.Kill()

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// A save is buffered until WaitForSave, which reports the failure.
	require.NoError(t, w.SaveLayer(ctx, request("down", 3, blockSize), "a", blockSize, []byte("kv")))
	requireOutage(t, w.WaitForSave(ctx), addr)
	kvData, err := w.LoadLayer(ctx, before, "a", 2*blockSize)
	requireOutage(t, err, addr)
	assert.Nil(t, kvData)
	n, err = s.MatchedTokens(ctx, before, 0)
	requireOutage(t, err, addr)
	assert.Zero(t, n)

	srv.Restart()

	after := request("after", 2, 2*blockSize)
	retry(t, "save after the restart", func() error {
		if err := w.SaveLayer(t.Context(), after, "a", 2*blockSize, kvOf(after, "a", 2*blockSize)); err != nil {
			return err
		}
		return w.WaitForSave(t.Context())
	})
	retry(t, "look up after the restart", func() error {
		_, err := s.MatchedTokens(t.Context(), after, 0)
		return err
	})
	// go-redis pools pipelines apart from single commands, and each pool
	// redials on its own schedule, so loads get their own wait.
	retry(t, "load after the restart", func() error {
		_, err := w.LoadLayer(t.Context(), after, "a", 2*blockSize)
		return err
	})
	save(t, w, after, 2*blockSize, "b")
	n, err = s.MatchedTokens(t.Context(), after, 0)
	require.NoError(t, err)
	assert.Equal(t, 2*blockSize, n)
	for _, l := range []string{"a", "b"} {
		kvData, err := w.LoadLayer(t.Context(), after, l, 2*blockSize)
		require.NoError(t, err)
		assert.Equal(t, kvOf(after, l, 2*blockSize), kvData)
	}

	// The server restarted without persistence: what was saved before is
	// gone, and the connector must say so.
	n, err = s.MatchedTokens(t.Context(), before, 0)
	require.NoError(t, err)
	assert.Zero(t, n)
	_, err = w.LoadLayer(t.Context(), before, "a", 2*blockSize)
	require.ErrorIs(t, err, kv.ErrMiss)

	close(stop)
	done.Wait()
	assert.Zero(t, wrongData.Load(), "loads that returned KV other than what was saved")
	t.Logf("background loads that succeeded: %d", loaded.Load())
}

// requireOutage checks that err reports the server as unreachable: an
// error naming it, and not a miss, which would let the engine believe the
// KV is simply absent.
func requireOutage(t *testing.T, err error, addr string) {
	t.Helper()
	require.Error(t, err)
	assert.NotErrorIs(t, err, kv.ErrMiss)
	assert.Contains(t, err.Error(), "redis at "+addr)
}

// retry calls f until it succeeds, for at most 10 seconds.
func retry(t *testing.T, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after 10s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
