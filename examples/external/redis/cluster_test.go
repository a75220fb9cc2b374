package redis_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/external/redis"
	"github.com/kvgen/kvgen/examples/external/redis/internal/redistest"
	"github.com/kvgen/kvgen/registry/conformance"
	"github.com/kvgen/kvgen/registry/kv"
)

// clusterExtra points the connector at a cluster by one seed node, as a
// deployment does with a configuration endpoint.
func clusterExtra(c *redistest.Cluster, prefix string) map[string]any {
	return map[string]any{
		"addrs":         []string{c.Nodes[0].Addr()},
		"cluster":       true,
		"key_prefix":    prefix,
		"dial_timeout":  "1s",
		"read_timeout":  "1s",
		"write_timeout": "1s",
	}
}

func TestClusterConformance(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	conformance.Run(t, redis.New, conformance.Options{
		Extra: func(t testing.TB) map[string]any {
			return clusterExtra(c, "conformance:"+t.Name()+":")
		},
		Remove: func(t testing.TB, extra map[string]any, prefix kv.BlockHash, layer string) {
			raw := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs()})
			defer raw.Close()
			key := extra["key_prefix"].(string) + "{" + prefix.String() + "}:" + url.PathEscape(layer)
			require.Equal(t, int64(1), raw.Del(t.Context(), key).Val(), "the layer was stored")
		},
	})
}

// TestClusterNeedsTheSetting checks that one seed address of a cluster
// without "cluster": true fails at start-up and says what to set, instead
// of failing every save with MOVED or EXECABORT.
func TestClusterNeedsTheSetting(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	_, err := redis.New(t.Context(), config("e", map[string]any{"addrs": []string{c.Nodes[0].Addr()}}), kv.RoleWorker)
	require.ErrorContains(t, err, `the server is a Redis Cluster node: set "cluster": true`)

	// Every node as a seed works without the setting too.
	w := openWorker(t, config("e", map[string]any{"addrs": c.Addrs()}, "a"))
	req := request("r", 1, blockSize)
	save(t, w, req, blockSize, "a")
	kvData, err := w.LoadLayer(t.Context(), req, "a", blockSize)
	require.NoError(t, err)
	assert.Equal(t, kvOf(req, "a", blockSize), kvData)
}

// tally counts the outcomes of loads that run while the cluster changes.
type tally struct {
	ok, miss, failed, wrong atomic.Int64
}

// load loads every layer of req's prefix of n tokens and counts what
// happened; it reports whether all of them loaded.
func (tl *tally) load(ctx context.Context, w kv.Worker, req *kv.Request, n int, layers ...string) bool {
	all := true
	for _, l := range layers {
		kvData, err := w.LoadLayer(ctx, req, l, n)
		switch {
		case err == nil && bytes.Equal(kvData, kvOf(req, l, n)):
			tl.ok.Add(1)
		case err == nil || kvData != nil:
			tl.wrong.Add(1)
			all = false
		case errors.Is(err, kv.ErrMiss):
			tl.miss.Add(1)
			all = false
		default:
			tl.failed.Add(1)
			all = false
		}
	}
	return all
}

func (tl *tally) String() string {
	return fmt.Sprintf("%d loaded, %d misses, %d errors, %d wrong", tl.ok.Load(), tl.miss.Load(), tl.failed.Load(), tl.wrong.Load())
}

// clusterLayers are the layers the cluster tests save and load.
var clusterLayers = []string{"a", "b"}

// startLoaded starts a cluster, opens a worker on it with keyPrefix, saves
// n prefixes spread over the slots and waits until the replicas have them.
func startLoaded(t *testing.T, keyPrefix string, n int) (*redistest.Cluster, kv.Worker, []*kv.Request) {
	c := redistest.StartCluster(t)
	layers := clusterLayers
	w := openWorker(t, config("e", clusterExtra(c, keyPrefix), layers...))
	reqs := make([]*kv.Request, n)
	for i := range reqs {
		reqs[i] = request("r"+strconv.Itoa(i), uint32(i+1), blockSize)
		for _, l := range layers {
			require.NoError(t, w.SaveLayer(t.Context(), reqs[i], l, blockSize, kvOf(reqs[i], l, blockSize)))
		}
	}
	require.NoError(t, w.WaitForSave(t.Context()))
	c.WaitHealthy()
	return c, w, reqs
}

// repeat calls f with 0, 1, 2, ... until stop is closed.
func repeat(stop <-chan struct{}, f func(i int)) {
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		f(i)
	}
}

// TestClusterFailover kills a master with SIGKILL while loads run: until
// its replica takes over, loads of its slots fail or miss, never return
// wrong bytes, and afterwards everything that was replicated loads again.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	c, w, reqs := startLoaded(t, "failover:", 60)
	layers := clusterLayers

	var during tally
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { // more traffic, from another goroutine
		repeat(stop, func(i int) {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			during.load(ctx, w, reqs[i%len(reqs)], blockSize, layers...)
		})
	})

	victim := c.Masters()[0]
	killed := time.Now()
	victim.Kill()
	var recovered time.Duration
	for {
		all := true
		for _, req := range reqs {
			ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
			all = during.load(ctx, w, req, blockSize, layers...) && all
			cancel()
		}
		if all {
			recovered = time.Since(killed)
			break
		}
		// A guard against a takeover that never comes, not a measure of
		// its speed (logged below): far beyond the node timeout.
		require.Less(t, time.Since(killed), 2*time.Minute, "loads still fail two minutes after the kill: %v", &during)
		time.Sleep(50 * time.Millisecond)
	}
	close(stop)
	bg.Wait()
	t.Logf("master %s killed; every prefix loads again after %v; during the takeover: %v", victim.Addr(), recovered.Round(time.Millisecond), &during)
	assert.Zero(t, during.wrong.Load(), "loads that returned wrong bytes")
	assert.Positive(t, during.miss.Load()+during.failed.Load(), "loads of the killed master's slots failed or missed until the replica took over")

	c.WaitHealthy()
	var after tally
	for _, req := range reqs {
		assert.True(t, after.load(t.Context(), w, req, blockSize, layers...), "saved and replicated before the kill: %s", req.ID)
	}
	newer := request("after", 9999, blockSize)
	save(t, w, newer, blockSize, layers...)
	assert.True(t, after.load(t.Context(), w, newer, blockSize, layers...), "saves work after the takeover")
	assert.Zero(t, after.wrong.Load()+after.miss.Load()+after.failed.Load(), "after the takeover: %v", &after)
}

// TestClusterResharding moves slots between masters while requests load
// and save: redirected (ASK, then MOVED) loads keep returning what was
// saved, nothing still stored turns into a miss, and the keys did move.
func TestClusterResharding(t *testing.T) {
	t.Parallel()
	c, w, reqs := startLoaded(t, "reshard:", 600)
	layers := clusterLayers
	masters := c.Masters()
	from, to := masters[0], masters[1]
	// New saves go elsewhere, so what leaves the source is the old keys.
	newer := openWorker(t, config("e", clusterExtra(c, "reshard-new:"), layers...))
	keysBefore := countKeys(t, c, from, "reshard:*")

	var (
		during tally
		stop   = make(chan struct{})
		bg     sync.WaitGroup
		mu     sync.Mutex
		saved  []*kv.Request // saved during the move, WaitForSave returned nil
		failed atomic.Int64  // saves during the move that reported an error
	)
	bg.Go(func() {
		repeat(stop, func(i int) { during.load(t.Context(), w, reqs[i%len(reqs)], blockSize, layers...) })
	})
	bg.Go(func() {
		repeat(stop, func(i int) {
			req := request("new"+strconv.Itoa(i), uint32(100000+i), blockSize)
			for _, l := range layers {
				_ = newer.SaveLayer(t.Context(), req, l, blockSize, kvOf(req, l, blockSize))
			}
			if newer.WaitForSave(t.Context()) != nil {
				failed.Add(1)
				return
			}
			mu.Lock()
			saved = append(saved, req)
			mu.Unlock()
		})
	})
	start := time.Now()
	require.NoError(t, c.Reshard(from, to, 1500))
	took := time.Since(start)
	close(stop)
	bg.Wait()
	keysAfter := countKeys(t, c, from, "reshard:*")
	t.Logf("resharded 1500 slots in %v (%d keys left %s); loads meanwhile: %v; saves meanwhile: %d stored, %d failed",
		took.Round(time.Millisecond), keysBefore-keysAfter, from.Addr(), &during, len(saved), failed.Load())
	assert.Less(t, keysAfter, keysBefore, "keys moved off the source master")
	assert.Zero(t, during.wrong.Load(), "loads that returned wrong bytes")
	assert.Zero(t, during.miss.Load(), "loads that missed KV that was stored all along")

	var after tally
	for _, req := range reqs {
		after.load(t.Context(), w, req, blockSize, layers...)
	}
	for _, req := range saved {
		after.load(t.Context(), newer, req, blockSize, layers...)
	}
	assert.Zero(t, after.wrong.Load()+after.miss.Load()+after.failed.Load(), "after the move: %v", &after)
}

// countKeys counts the keys that match pattern on node n alone.
func countKeys(t *testing.T, c *redistest.Cluster, n *redistest.Server, pattern string) int {
	out, err := c.CLI(n, "--scan", "--pattern", pattern)
	require.NoError(t, err)
	return len(strings.Fields(out))
}
