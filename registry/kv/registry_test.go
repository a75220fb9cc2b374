package kv_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/buildinfo"
	"github.com/kvgen/kvgen/registry"
	"github.com/kvgen/kvgen/registry/kv"
)

// quiet is a logger for tests that do not look at the creation records.
var quiet = slog.New(slog.DiscardHandler)

func entry(name string, aliases ...string) kv.Entry {
	return kv.Entry{
		Name:        name,
		Aliases:     aliases,
		ImportPath:  "example.com/kv/" + strings.ToLower(name),
		Constructor: "New",
		Module:      "example.com/kv",
		Factory:     storeFactory(newKVStore()),
	}
}

func TestNewRejects(t *testing.T) {
	noFactory := entry("memory")
	noFactory.Factory = nil
	tests := []struct {
		name    string
		entries []kv.Entry
		want    string
	}{
		{
			name:    "duplicate name",
			entries: []kv.Entry{entry("memory"), entry("redis"), entry("memory")},
			want:    `registry: entry 3 ("memory"): name "memory" is already the name of entry 1 ("memory")`,
		},
		{
			name:    "name taken by an alias",
			entries: []kv.Entry{entry("lmcache", "LMCacheConnectorV1"), entry("LMCacheConnectorV1")},
			want:    `registry: entry 2 ("LMCacheConnectorV1"): name "LMCacheConnectorV1" is already an alias of entry 1 ("lmcache")`,
		},
		{
			name:    "alias taken by a name",
			entries: []kv.Entry{entry("filesystem"), entry("disk", "filesystem")},
			want:    `registry: entry 2 ("disk"): alias "filesystem" is already the name of entry 1 ("filesystem")`,
		},
		{
			name:    "alias taken by an alias",
			entries: []kv.Entry{entry("filesystem", "ExampleConnector"), entry("memory", "ExampleConnector")},
			want:    `registry: entry 2 ("memory"): alias "ExampleConnector" is already an alias of entry 1 ("filesystem")`,
		},
		{
			name:    "empty name",
			entries: []kv.Entry{entry("")},
			want:    `registry: entry 1 (""): empty name`,
		},
		{
			name:    "empty alias",
			entries: []kv.Entry{entry("memory", "mem", "")},
			want:    `registry: entry 1 ("memory"): empty alias`,
		},
		{
			name:    "nil factory",
			entries: []kv.Entry{noFactory},
			want:    `registry: entry 1 ("memory"): nil factory`,
		},
		{
			name:    "every problem at once",
			entries: []kv.Entry{entry("memory", "mem"), noFactory, entry("", "mem"), entry("redis", "")},
			want: strings.Join([]string{
				`registry: entry 2 ("memory"): name "memory" is already the name of entry 1 ("memory")`,
				`registry: entry 2 ("memory"): nil factory`,
				`registry: entry 3 (""): empty name`,
				`registry: entry 3 (""): alias "mem" is already an alias of entry 1 ("memory")`,
				`registry: entry 4 ("redis"): empty alias`,
			}, "\n"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := kv.New(tt.entries...)
			require.EqualError(t, err, tt.want)
			assert.Nil(t, r)
			assert.PanicsWithError(t, tt.want, func() { kv.MustNew(tt.entries...) })
		})
	}
}

func TestCreateUnknownSuggestsNearest(t *testing.T) {
	r := kv.MustNew(entry("NixlConnector"), entry("LMCacheConnectorV1", "lmcache"), entry("memory"), entry("redis"))
	_, err := r.Create(t.Context(), kv.Config{Connector: "NixlConector"}, kv.RoleWorker)
	var unknown *registry.UnknownNameError
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, "NixlConector", unknown.Name)
	assert.Equal(t, []string{"NixlConnector"}, unknown.Suggestions)
	assert.Equal(t, []string{"LMCacheConnectorV1", "NixlConnector", "memory", "redis"}, unknown.Linked)
	assert.EqualError(t, err, `unknown kv connector "NixlConector" (did you mean "NixlConnector"?); `+
		`linked: LMCacheConnectorV1, NixlConnector, memory, redis; to link another, add it to the manifest and regenerate`)

	// Aliases are suggested too, and several suggestions are listed.
	_, err = r.Create(t.Context(), kv.Config{Connector: "rediss"}, kv.RoleWorker)
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, []string{"redis"}, unknown.Suggestions)
	_, err = r.Create(t.Context(), kv.Config{Connector: "lmcach"}, kv.RoleWorker)
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, []string{"lmcache", "LMCacheConnectorV1"}, unknown.Suggestions)
	assert.True(t, strings.HasPrefix(err.Error(), `unknown kv connector "lmcach" (did you mean "lmcache" or "LMCacheConnectorV1"?); `), err.Error())
}

func TestCreateUnknownWithoutNearMatch(t *testing.T) {
	r := kv.MustNew(entry("memory"), entry("redis"))
	_, err := r.Create(t.Context(), kv.Config{Connector: "TransferEngine"}, kv.RoleScheduler)
	var unknown *registry.UnknownNameError
	require.ErrorAs(t, err, &unknown)
	assert.Empty(t, unknown.Suggestions)
	assert.EqualError(t, err, `unknown kv connector "TransferEngine"; linked: memory, redis; `+
		`to link another, add it to the manifest and regenerate`)

	empty := kv.MustNew()
	_, err = empty.Create(t.Context(), kv.Config{Connector: "memory"}, kv.RoleScheduler)
	assert.EqualError(t, err, `unknown kv connector "memory"; this binary links no connectors; `+
		`to link another, add it to the manifest and regenerate`)
}

func TestCreateUnknownAmongManyCountsThem(t *testing.T) {
	var entries []kv.Entry
	for i := range 13 {
		entries = append(entries, entry(fmt.Sprintf("store%02d", i)))
	}
	_, err := kv.MustNew(entries...).Create(t.Context(), kv.Config{Connector: "zzz"}, kv.RoleWorker)
	assert.EqualError(t, err, `unknown kv connector "zzz"; 13 connectors are linked; `+
		`to link another, add it to the manifest and regenerate`)
}

func TestCreateUnsupportedRole(t *testing.T) {
	e := entry("lookup")
	e.Roles = []string{"scheduler"}
	r := kv.MustNew(e).WithLogger(quiet)

	_, err := r.Create(t.Context(), kv.Config{Connector: "lookup", BlockSize: 16}, kv.RoleWorker)
	require.ErrorIs(t, err, kv.ErrUnsupportedRole)
	assert.EqualError(t, err, `kv connector "lookup": does not serve the role worker (it serves scheduler)`)

	c, err := r.Create(t.Context(), kv.Config{Connector: "lookup", BlockSize: 16}, kv.RoleScheduler)
	require.NoError(t, err)
	assert.Implements(t, (*kv.Scheduler)(nil), c)

	_, err = r.Create(t.Context(), kv.Config{Connector: "lookup"}, kv.Role(0))
	assert.EqualError(t, err, `kv connector "lookup": invalid role Role(0)`)
}

func TestCreateWrapsConstructorError(t *testing.T) {
	refused := errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")
	e := entry("redis")
	e.Factory = func(context.Context, kv.Config, kv.Role) (kv.Connector, error) {
		return nil, refused
	}
	_, err := kv.MustNew(e).Create(t.Context(), kv.Config{Connector: "redis"}, kv.RoleWorker)
	require.ErrorIs(t, err, refused)
	assert.EqualError(t, err, `kv connector "redis" (worker): dial tcp 127.0.0.1:6379: connect: connection refused`)
}

func TestCreateClosesWhatAFailingConstructorReturned(t *testing.T) {
	st := newKVStore()
	e := entry("memory")
	e.Factory = func(context.Context, kv.Config, kv.Role) (kv.Connector, error) {
		return &storeConn{st: st}, errors.New("half built")
	}
	_, err := kv.MustNew(e).Create(t.Context(), kv.Config{Connector: "memory"}, kv.RoleWorker)
	require.EqualError(t, err, `kv connector "memory" (worker): half built`)
	assert.Equal(t, 1, st.closes())

	// A constructor returning *T hands back a nil *T in a non-nil
	// Connector with its error; that must not be closed.
	e.Factory = func(context.Context, kv.Config, kv.Role) (kv.Connector, error) {
		var c *storeConn
		return c, errors.New("no backend")
	}
	assert.NotPanics(t, func() {
		_, err = kv.MustNew(e).Create(t.Context(), kv.Config{Connector: "memory"}, kv.RoleWorker)
	})
	assert.EqualError(t, err, `kv connector "memory" (worker): no backend`)
}

func TestCreateRejectsNilConnector(t *testing.T) {
	typedNil := entry("memory")
	typedNil.Factory = func(context.Context, kv.Config, kv.Role) (kv.Connector, error) {
		var c *storeConn
		return c, nil
	}
	untypedNil := kv.Entry{
		Name:    "bare",
		Factory: func(context.Context, kv.Config, kv.Role) (kv.Connector, error) { return nil, nil },
	}
	r := kv.MustNew(typedNil, untypedNil)

	_, err := r.Create(t.Context(), kv.Config{Connector: "memory"}, kv.RoleScheduler)
	require.ErrorIs(t, err, kv.ErrNilConnector)
	assert.EqualError(t, err, `kv connector "memory" (scheduler): example.com/kv/memory.New returned a nil connector and no error`)

	// An entry built by hand need not say where its constructor is.
	_, err = r.Create(t.Context(), kv.Config{Connector: "bare"}, kv.RoleWorker)
	require.ErrorIs(t, err, kv.ErrNilConnector)
	assert.EqualError(t, err, `kv connector "bare" (worker): the constructor returned a nil connector and no error`)
}

func TestCreateRejectsConnectorWithoutRoleInterface(t *testing.T) {
	var made []*closeOnly
	e := entry("half")
	e.Factory = func(context.Context, kv.Config, kv.Role) (kv.Connector, error) {
		c := &closeOnly{}
		made = append(made, c)
		return c, nil
	}
	r := kv.MustNew(e)

	_, err := r.Create(t.Context(), kv.Config{Connector: "half"}, kv.RoleWorker)
	require.ErrorIs(t, err, kv.ErrRoleInterface)
	assert.EqualError(t, err, `kv connector "half" (worker): *kv_test.closeOnly does not implement the role's interface kv.Worker`)

	_, err = r.Create(t.Context(), kv.Config{Connector: "half"}, kv.RoleScheduler)
	assert.EqualError(t, err, `kv connector "half" (scheduler): *kv_test.closeOnly does not implement the role's interface kv.Scheduler`)

	require.Len(t, made, 2)
	assert.True(t, made[0].closed, "a connector rejected for its role must be closed")
	assert.True(t, made[1].closed, "a connector rejected for its role must be closed")
}

func TestLookup(t *testing.T) {
	e := entry("LMCacheConnectorV1", "lmcache", "LMCache")
	e.Roles = []string{"worker"}
	r := kv.MustNew(entry("memory"), e)

	for _, key := range []string{"LMCacheConnectorV1", "lmcache", "LMCache"} {
		got, ok := r.Lookup(key)
		require.True(t, ok, key)
		assert.Equal(t, "LMCacheConnectorV1", got.Name)
		assert.Equal(t, []string{"lmcache", "LMCache"}, got.Aliases)
		assert.Equal(t, "example.com/kv/lmcacheconnectorv1", got.ImportPath)
		assert.Equal(t, []string{"worker"}, got.Roles)
		assert.NotNil(t, got.Factory)
	}
	_, ok := r.Lookup("lmcach")
	assert.False(t, ok)
	_, ok = r.Lookup("")
	assert.False(t, ok)
}

func TestNamesSortedWithoutAliases(t *testing.T) {
	r := kv.MustNew(entry("redis"), entry("NixlConnector", "nixl"), entry("filesystem"), entry("LMCacheConnectorV1"))
	names := r.Names()
	assert.Equal(t, []string{"LMCacheConnectorV1", "NixlConnector", "filesystem", "redis"}, names)
	names[0] = "changed"
	assert.Equal(t, "LMCacheConnectorV1", r.Names()[0])
}

func TestEntriesInManifestOrderAsCopies(t *testing.T) {
	aliases := []string{"ExampleConnector"}
	r := kv.MustNew(entry("redis"), entry("filesystem", aliases...), entry("memory"))
	aliases[0] = "changed by the caller of New"

	got := r.Entries()
	require.Len(t, got, 3)
	assert.Equal(t, "redis", got[0].Name)
	assert.Equal(t, "filesystem", got[1].Name)
	assert.Equal(t, "memory", got[2].Name)
	assert.Equal(t, []string{"ExampleConnector"}, got[1].Aliases)

	got[1].Name = "changed"
	got[1].Aliases[0] = "changed"
	got[0].Roles = []string{"scheduler"}
	again := r.Entries()
	assert.Equal(t, "filesystem", again[1].Name)
	assert.Equal(t, []string{"ExampleConnector"}, again[1].Aliases)
	assert.Nil(t, again[0].Roles)
	e, ok := r.Lookup("ExampleConnector")
	require.True(t, ok)
	assert.Equal(t, "filesystem", e.Name)
}

func TestEntriesVersionFromBuildInfo(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	// Test binaries record the main module, not their dependencies.
	mod := info.Main.Path
	want := buildinfo.ModuleVersion(info, mod)
	require.NotEmpty(t, want)

	linked := entry("linked")
	linked.Module = mod
	pinned := entry("pinned")
	pinned.Module = mod
	pinned.Version = "v0.0.1"
	absent := entry("absent")
	absent.Module = "example.com/not/linked"
	r := kv.MustNew(linked, pinned, absent)

	got := r.Entries()
	assert.Equal(t, want, got[0].Version)
	assert.Equal(t, "v0.0.1", got[1].Version, "a version set by the generated code is kept")
	assert.Empty(t, got[2].Version)
	e, _ := r.Lookup("linked")
	assert.Equal(t, want, e.Version)
}

func TestSchedulerAndWorkerInOneProcess(t *testing.T) {
	st := newKVStore()
	e := entry("memory")
	e.Factory = storeFactory(st)
	r := kv.MustNew(e).WithLogger(quiet)
	cfg := kv.Config{Connector: "memory", EngineID: "engine-0", BlockSize: 4}

	sc, err := r.Create(t.Context(), cfg, kv.RoleScheduler)
	require.NoError(t, err)
	wc, err := r.Create(t.Context(), cfg, kv.RoleWorker)
	require.NoError(t, err)
	assert.NotSame(t, sc, wc, "each role gets its own instance")

	calls := st.calls()
	require.Len(t, calls, 2)
	assert.Equal(t, kv.RoleScheduler, calls[0].role)
	assert.Equal(t, kv.RoleWorker, calls[1].role)
	assert.Same(t, r, calls[0].creator, "Config.Registry is the registry that creates")
	assert.Equal(t, "engine-0", calls[1].cfg.EngineID)

	// The two sides cooperate: what the worker saves, the scheduler finds.
	req := &kv.Request{ID: "r1", PromptTokens: []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}}
	require.NoError(t, wc.(kv.Worker).SaveLayer(t.Context(), req, "layer.0", 8, []byte("kv")))
	n, err := sc.(kv.Scheduler).MatchedTokens(t.Context(), req, 4)
	require.NoError(t, err)
	assert.Equal(t, 4, n)

	require.NoError(t, sc.Close())
	require.NoError(t, wc.Close())
	assert.Equal(t, 2, st.closes())
	assert.Nil(t, kv.Config{}.Registry(), "a Config not passed through Create has no registry")
}

func TestConcurrentCreateAndLookup(t *testing.T) {
	st := newKVStore()
	entries := []kv.Entry{entry("redis"), entry("filesystem", "ExampleConnector"), entry("memory")}
	entries[2].Factory = storeFactory(st)
	r := kv.MustNew(entries...).WithLogger(quiet)

	const goroutines, rounds = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Go(func() {
			role := kv.Roles()[g%2]
			for i := range rounds {
				c, err := r.Create(context.Background(), kv.Config{Connector: "memory", BlockSize: 16}, role)
				if err != nil {
					errs <- err
					return
				}
				if e, ok := r.Lookup("ExampleConnector"); !ok || e.Name != "filesystem" {
					errs <- fmt.Errorf("round %d: Lookup(ExampleConnector) = %q, %v", i, e.Name, ok)
					return
				}
				if n := len(r.Entries()); n != 3 {
					errs <- fmt.Errorf("round %d: %d entries", i, n)
					return
				}
				_ = c.Close()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Len(t, st.calls(), goroutines*rounds)
	assert.Equal(t, goroutines*rounds, st.closes())
}

func TestCreateLogsRecordAtDebug(t *testing.T) {
	h := newRecorder(slog.LevelDebug)
	r := kv.MustNew(entry("redis", "RedisConnector")).WithLogger(slog.New(h))

	_, err := r.Create(t.Context(), kv.Config{Connector: "RedisConnector", EngineID: "prefill-0"}, kv.RoleWorker)
	require.NoError(t, err)

	recs := h.records()
	require.Len(t, recs, 1)
	assert.Equal(t, slog.LevelDebug, recs[0].Level)
	assert.Equal(t, "kv connector created", recs[0].Message)
	assert.Equal(t, map[string]string{
		"connector": "redis",
		"engine_id": "prefill-0",
		"role":      "worker",
		"import":    "example.com/kv/redis",
	}, attrs(recs[0]))

	// A failed creation logs nothing.
	_, err = r.Create(t.Context(), kv.Config{Connector: "redi"}, kv.RoleWorker)
	require.Error(t, err)
	assert.Len(t, h.records(), 1)
}

func TestCreateSkipsRecordBelowLevel(t *testing.T) {
	// A host that logs at Info, as most do, prints nothing per connector.
	h := newRecorder(slog.LevelInfo)
	r := kv.MustNew(entry("redis")).WithLogger(slog.New(h))
	_, err := r.Create(t.Context(), kv.Config{Connector: "redis"}, kv.RoleScheduler)
	require.NoError(t, err)
	assert.Empty(t, h.records())
}

func TestWithLoggerLeavesOriginal(t *testing.T) {
	first, second := newRecorder(slog.LevelDebug), newRecorder(slog.LevelDebug)
	orig := kv.MustNew(entry("memory")).WithLogger(slog.New(first))
	derived := orig.WithLogger(slog.New(second))

	_, err := orig.Create(t.Context(), kv.Config{Connector: "memory"}, kv.RoleWorker)
	require.NoError(t, err)
	assert.Len(t, first.records(), 1)
	assert.Empty(t, second.records())

	_, err = derived.Create(t.Context(), kv.Config{Connector: "memory"}, kv.RoleWorker)
	require.NoError(t, err)
	assert.Len(t, first.records(), 1)
	assert.Len(t, second.records(), 1)
	assert.Equal(t, orig.Names(), derived.Names())
}

func TestAdaptedConstructor(t *testing.T) {
	st := newKVStore()
	var fail, none bool
	newConn := func(_ context.Context, cfg kv.Config, _ kv.Role) (*storeConn, error) {
		switch {
		case fail:
			return nil, errors.New("no backend")
		case none:
			return nil, nil
		}
		return &storeConn{st: st}, nil
	}
	e := entry("memory")
	e.Factory = kv.Adapt(newConn)
	r := kv.MustNew(e).WithLogger(quiet)
	cfg := kv.Config{Connector: "memory", BlockSize: 16}

	c, err := r.Create(t.Context(), cfg, kv.RoleWorker)
	require.NoError(t, err)
	assert.IsType(t, &storeConn{}, c)

	// The constructor's nil *storeConn reaches Create inside a non-nil
	// Connector: it is neither closed nor returned.
	fail = true
	assert.NotPanics(t, func() { _, err = r.Create(t.Context(), cfg, kv.RoleWorker) })
	assert.EqualError(t, err, `kv connector "memory" (worker): no backend`)
	fail, none = false, true
	_, err = r.Create(t.Context(), cfg, kv.RoleWorker)
	require.ErrorIs(t, err, kv.ErrNilConnector)
	assert.Zero(t, st.closes())
}

func TestCreateLogsToDefaultLogger(t *testing.T) {
	h := newRecorder(slog.LevelDebug)
	prev := slog.Default()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() { slog.SetDefault(prev) })

	_, err := kv.MustNew(entry("memory")).Create(t.Context(), kv.Config{Connector: "memory"}, kv.RoleWorker)
	require.NoError(t, err)
	require.Len(t, h.records(), 1)
	assert.Equal(t, "memory", attrs(h.records()[0])["connector"])
}

func TestCreateSchedulerAndWorkerReturnRoleInterfaces(t *testing.T) {
	st := newKVStore()
	e := entry("memory")
	e.Factory = storeFactory(st)
	r := kv.MustNew(e).WithLogger(quiet)
	cfg := kv.Config{Connector: "memory", BlockSize: 4}
	ctx := t.Context()

	w, err := r.CreateWorker(ctx, cfg)
	require.NoError(t, err)
	s, err := r.CreateScheduler(ctx, cfg)
	require.NoError(t, err)
	require.NoError(t, w.SaveLayer(ctx, prompt, "layer.0", 8, []byte("kv")))
	n, err := s.MatchedTokens(ctx, prompt, 0)
	require.NoError(t, err)
	assert.Equal(t, 8, n, "the scheduler side sees what the worker side saved")
	roles := []kv.Role{}
	for _, c := range st.calls() {
		roles = append(roles, c.role)
	}
	assert.Equal(t, []kv.Role{kv.RoleWorker, kv.RoleScheduler}, roles)

	// Create's errors come back unchanged, with a nil interface.
	lookup := entry("lookup")
	lookup.Roles = []string{"scheduler"}
	r = kv.MustNew(lookup).WithLogger(quiet)
	w, err = r.CreateWorker(ctx, kv.Config{Connector: "lookup", BlockSize: 4})
	require.ErrorIs(t, err, kv.ErrUnsupportedRole)
	assert.Nil(t, w)
	s, err = r.CreateScheduler(ctx, kv.Config{Connector: "lookp"})
	var unknown *registry.UnknownNameError
	require.ErrorAs(t, err, &unknown)
	assert.Nil(t, s)
}

// warnFactory returns a Factory whose constructor logs a warning through
// the logger its Config carries, as a connector does for a corrupt value.
func warnFactory(got **slog.Logger) kv.Factory {
	return func(_ context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
		*got = cfg.Logger()
		cfg.Logger().Warn("stored value fails its check", "key", "k1")
		return &storeConn{st: newKVStore()}, nil
	}
}

func TestConfigLoggerIsTheHostsLogger(t *testing.T) {
	var got *slog.Logger
	e := entry("redis")
	e.Factory = warnFactory(&got)
	host := newRecorder(slog.LevelInfo)
	r := kv.MustNew(e).WithLogger(slog.New(host))

	_, err := r.CreateWorker(t.Context(), kv.Config{Connector: "redis", BlockSize: 4})
	require.NoError(t, err)
	recs := host.records()
	require.Len(t, recs, 1, "the connector's warning, and no record of the creation at Info")
	assert.Equal(t, slog.LevelWarn, recs[0].Level)
	assert.Equal(t, "stored value fails its check", recs[0].Message)
	assert.Equal(t, map[string]string{"key": "k1", "connector": "redis", "role": "worker"}, attrs(recs[0]))
}

func TestConfigLoggerDefaultsToSlogDefault(t *testing.T) {
	h := newRecorder(slog.LevelInfo)
	prev := slog.Default()
	slog.SetDefault(slog.New(h))
	t.Cleanup(func() { slog.SetDefault(prev) })

	// A constructor called directly still has a logger.
	assert.Same(t, slog.Default(), kv.Config{}.Logger())

	// Through a registry without a logger, records go to slog.Default.
	var got *slog.Logger
	e := entry("redis")
	e.Factory = warnFactory(&got)
	_, err := kv.MustNew(e).CreateScheduler(t.Context(), kv.Config{Connector: "redis", BlockSize: 4})
	require.NoError(t, err)
	require.NotNil(t, got)
	require.Len(t, h.records(), 1)
	assert.Equal(t, "scheduler", attrs(h.records()[0])["role"])

	// So does a registry given a nil logger.
	_, err = kv.MustNew(e).WithLogger(nil).CreateWorker(t.Context(), kv.Config{Connector: "redis", BlockSize: 4})
	require.NoError(t, err)
	assert.Len(t, h.records(), 2)
}
