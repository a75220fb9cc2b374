package redis_test

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/examples/external/redis/internal/redistest"
	"github.com/kvgen/kvgen/registry/kv"
)

// eventWait bounds how long a removal takes to be reported: the server's
// expiry cycle finds a key within about 100ms of its TTL.
const eventWait = 10 * time.Second

// router is a router's index of one engine's blocks, replayed from the
// connector's events as they come, checking each as vLLM's meaning has
// it.
type router struct {
	t        *testing.T
	mu       sync.Mutex
	blocks   map[kv.BlockHash]bool
	removals int
	clears   int
	kinds    []kv.EventKind // of every event, in order
}

func newRouter(t *testing.T) *router { return &router{t: t, blocks: map[kv.BlockHash]bool{}} }

func (r *router) apply(e kv.KVEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds = append(r.kinds, e.Kind)
	switch e.Kind {
	case kv.BlockStored:
		assert.Equal(r.t, kv.MediumRedis, e.Medium)
		if e.ParentBlockHash != nil {
			assert.True(r.t, r.blocks[*e.ParentBlockHash], "the parent of a stored block is held")
		}
		assert.Len(r.t, e.BlockTokenIDs(), len(e.BlockHashes)*blockSize, "token_ids are blocks × block size")
		for _, h := range e.BlockHashes {
			assert.False(r.t, r.blocks[h], "BlockStored of a block held already")
			r.blocks[h] = true
		}
	case kv.BlockRemoved:
		r.removals++
		for _, h := range e.BlockHashes {
			assert.True(r.t, r.blocks[h], "BlockRemoved of a block not held")
			delete(r.blocks, h)
		}
	case kv.AllBlocksCleared:
		r.clears++
		clear(r.blocks)
	}
}

// eventKinds returns the kinds of the events reported so far.
func (r *router) eventKinds() []kv.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.kinds)
}

func (r *router) snapshot() (blocks map[kv.BlockHash]bool, removals, clears int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.blocks), r.removals, r.clears
}

// A router follows the events of a connector whose KV expires during the
// test: some prefixes are kept (their keys made persistent), one keeps
// all its layers but one, the others expire. The index replayed from the
// events ends equal to what the store can still load: removals name the
// blocks of the prefixes that expired, except a block a kept prefix
// shares, and a prefix saved again after its expiry is stored again.
func TestEventsKeepARoutersIndexTrue(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	raw := rawClient(t, srv.Addr())
	layers := []string{"a", "b", "c"}
	const keyPrefix = "events:"
	w := openWorker(t, config("e", map[string]any{"addrs": []string{srv.Addr()}, "key_prefix": keyPrefix, "ttl": "500ms"}, layers...))
	rt := newRouter(t)
	w.(kv.EventReporter).ReportEvents(rt.apply)
	assert.NoError(t, w.(kv.RemovalReporter).ReportsRemovals(), "removals are reported")
	ctx := t.Context()

	// b shares its first block with a.
	a := request("a", 1, 3*blockSize)
	b := &kv.Request{ID: "b", PromptTokens: slices.Concat(a.PromptTokens[:blockSize], request("b", 2, 2*blockSize).PromptTokens)}
	c := request("c", 3, 2*blockSize)
	d := request("d", 4, blockSize)
	type prefix struct {
		req *kv.Request
		n   int
	}
	saved := []prefix{{a, blockSize}, {a, 3 * blockSize}, {b, 3 * blockSize}, {c, 2 * blockSize}, {d, blockSize}}
	for _, p := range saved {
		save(t, w, p.req, p.n, layers...)
	}
	keys := func(p prefix, layers ...string) []string {
		h := prefixHash(t, "", p.req, p.n)
		out := []string{keyPrefix + "{" + h.String() + "}"}
		for _, l := range layers {
			out = append(out, keyPrefix+"{"+h.String()+"}:"+l)
		}
		return out
	}
	// a's longest prefix is kept whole; c's loses layer b.
	for _, k := range slices.Concat(keys(saved[1], layers...), keys(saved[3], "a", "c")) {
		require.True(t, raw.Persist(ctx, k).Val(), "%s outlives its TTL", k)
	}

	loadable := func() map[kv.BlockHash]bool {
		p, err := kv.NewPrefixes("", blockSize)
		require.NoError(t, err)
		out := map[kv.BlockHash]bool{}
		for _, s := range saved {
			all := true
			for _, l := range layers {
				if _, err := w.LoadLayer(ctx, s.req, l, s.n); err != nil {
					all = false
				}
			}
			if all {
				for _, h := range p.Hashes(s.req.PromptTokens[:s.n]) {
					out[h] = true
				}
			}
		}
		return out
	}
	agree := func(blocks int, what string) {
		t.Helper()
		var index, want map[kv.BlockHash]bool
		ok := assert.Eventually(t, func() bool {
			index, _, _ = rt.snapshot()
			want = loadable()
			return len(want) == blocks && maps.Equal(want, index)
		}, eventWait, 20*time.Millisecond, "%s: the index replayed from the events is what loads", what)
		if !ok {
			t.Logf("%s: %d blocks load, %d in the index", what, len(want), len(index))
		}
	}
	agree(3, "after the TTL: a's 3 blocks, held by its kept prefix")
	_, removals, clears := rt.snapshot()
	assert.Positive(t, removals, "BlockRemoved events")
	assert.Zero(t, clears, "AllBlocksCleared events")

	save(t, w, b, 3*blockSize, layers...)
	index, _, _ := rt.snapshot()
	assert.Len(t, index, 5, "b saved again: its 2 blocks beyond the one a holds")
	agree(3, "b expired again")
}

// reporting opens a worker on srv with extra settings and has it report
// its events to a router.
func reporting(t *testing.T, srv *redistest.Server, extra map[string]any) (kv.Worker, *router) {
	t.Helper()
	settings := map[string]any{"addrs": []string{srv.Addr()}, "dial_timeout": "1s", "read_timeout": "1s", "write_timeout": "1s"}
	maps.Copy(settings, extra)
	w := openWorker(t, config("e", settings, "a"))
	log := newRouter(t)
	w.(kv.EventReporter).ReportEvents(log.apply)
	t.Cleanup(func() { w.(kv.EventReporter).ReportEvents(nil) })
	return w, log
}

// waitFor waits until the events reported end with want.
func waitFor(t *testing.T, log *router, what string, want ...kv.EventKind) {
	t.Helper()
	require.Eventually(t, func() bool {
		got := log.eventKinds()
		return len(got) >= len(want) && slices.Equal(got[len(got)-len(want):], want)
	}, eventWait, 5*time.Millisecond, "%s: events end with %v; got %v", what, want, log.eventKinds())
}

// TestEventsClearedOnReconnect restarts the server under a connector that
// follows its notifications: the removals it missed meanwhile are
// reported as AllBlocksCleared once it is subscribed again, and the
// notifications it turned on are turned on again on the new server.
func TestEventsClearedOnReconnect(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	w, log := reporting(t, srv, nil)
	req := request("r", 1, blockSize)
	save(t, w, req, blockSize, "a")
	waitFor(t, log, "saved", kv.BlockStored)

	srv.Kill()
	srv.Restart()
	waitFor(t, log, "the server restarted, empty", kv.BlockStored, kv.AllBlocksCleared)

	save(t, w, req, blockSize, "a")
	waitFor(t, log, "saved again", kv.AllBlocksCleared, kv.BlockStored)
	h := prefixHash(t, "", req, blockSize)
	require.NoError(t, rawClient(t, srv.Addr()).Del(t.Context(), "kvgen:{"+h.String()+"}:a").Err())
	waitFor(t, log, "deleted on the new server", kv.BlockStored, kv.BlockRemoved)
	assert.NoError(t, w.(kv.RemovalReporter).ReportsRemovals())
}

// TestEventsKeyspaceSetting checks what keyspace_events does with servers
// that allow CONFIG and servers that refuse it.
func TestEventsKeyspaceSetting(t *testing.T) {
	t.Parallel()
	noConfig := []string{"--rename-command", "CONFIG", ""}
	for _, tc := range []struct {
		name     string
		args     []string
		setting  string
		removals string // what ReportsRemovals says; "" for nil
	}{
		{"auto turns them on", nil, "auto", ""},
		{"off", nil, "off", `keyspace_events is "off"`},
		{"auto on a server that refuses CONFIG", noConfig, "auto", "CONFIG GET notify-keyspace-events was refused"},
		{"assume on a server that refuses CONFIG and notifies", append([]string{"--notify-keyspace-events", "Exeg"}, noConfig...), "assume", ""},
		{"auto on a server that notifies some classes", []string{"--notify-keyspace-events", "Kx"}, "auto", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.StartWith(t, redistest.Options{Args: tc.args})
			w, log := reporting(t, srv, map[string]any{"keyspace_events": tc.setting})
			err := w.(kv.RemovalReporter).ReportsRemovals()
			if tc.removals != "" {
				require.ErrorContains(t, err, tc.removals)
			} else {
				require.NoError(t, err)
			}
			req := request("r", 1, blockSize)
			save(t, w, req, blockSize, "a")
			waitFor(t, log, "saved", kv.BlockStored)
			h := prefixHash(t, "", req, blockSize)
			require.NoError(t, rawClient(t, srv.Addr()).Unlink(t.Context(), "kvgen:{"+h.String()+"}:a").Err())
			if tc.removals == "" {
				waitFor(t, log, "unlinked", kv.BlockStored, kv.BlockRemoved)
				return
			}
			time.Sleep(50 * time.Millisecond) // a late report has a chance to show
			assert.Equal(t, []kv.EventKind{kv.BlockStored}, log.eventKinds(), "store-only")
		})
	}
}

// TestRemovalDuringASaveIsReported deletes a prefix's layer while the
// connector saves it, over and over: a deletion can land after the save's
// transaction and be notified before the connector reports the prefix
// held. The router must end holding only blocks the store can load.
func TestRemovalDuringASaveIsReported(t *testing.T) {
	t.Parallel()
	srv := startRedis(t)
	raw := rawClient(t, srv.Addr())
	w, log := reporting(t, srv, map[string]any{"key_prefix": "race:"})
	s := openScheduler(t, config("e", map[string]any{"addrs": []string{srv.Addr()}, "key_prefix": "race:"}, "a"))
	ctx := t.Context()
	const n = 300
	reqs := make([]*kv.Request, n)
	keys := make([]string, n)
	for i := range reqs {
		reqs[i] = request(fmt.Sprint("r", i), uint32(10+i), blockSize)
		keys[i] = "race:{" + prefixHash(t, "", reqs[i], blockSize).String() + "}:a"
	}
	var current atomic.Int64
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Go(func() {
		for !stop.Load() {
			raw.Del(ctx, keys[current.Load()])
		}
	})
	for i, req := range reqs {
		current.Store(int64(i))
		save(t, w, req, blockSize, "a")
		time.Sleep(time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()

	held := func() (stale []int) {
		blocks, _, _ := log.snapshot()
		for i, req := range reqs {
			if !blocks[prefixHash(t, "", req, blockSize)] {
				continue
			}
			if got, err := s.MatchedTokens(ctx, req, 0); err != nil || got == 0 {
				stale = append(stale, i)
			}
		}
		return stale
	}
	stale := held()
	for deadline := time.Now().Add(eventWait); len(stale) > 0 && time.Now().Before(deadline); stale = held() {
		time.Sleep(20 * time.Millisecond)
	}
	require.Empty(t, stale, "the router holds prefixes the store cannot load")
}
