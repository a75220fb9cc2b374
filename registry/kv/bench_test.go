package kv_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/kvgen/kvgen/registry"
	"github.com/kvgen/kvgen/registry/kv"
)

// rwRegistry is the registry most Go programs write by hand (database/sql's
// drivers, and many plugin registries): a map filled by Register calls,
// usually from init functions, guarded by a sync.RWMutex because
// registration and lookup may race.
type rwRegistry struct {
	mu sync.RWMutex
	m  map[string]kv.Factory
}

func (r *rwRegistry) Register(name string, f kv.Factory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		panic("register called twice for connector " + name)
	}
	r.m[name] = f
}

func (r *rwRegistry) Lookup(name string) (kv.Factory, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.m[name]
	return f, ok
}

func (r *rwRegistry) Create(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	f, ok := r.Lookup(cfg.Connector)
	if !ok {
		return nil, fmt.Errorf("unknown connector %q", cfg.Connector)
	}
	return f(ctx, cfg, role)
}

// newBenchConnector is a constructor of the size real ones have: it
// allocates the connector and the (empty) maps and lock of its store.
func newBenchConnector(_ context.Context, cfg kv.Config, _ kv.Role) (kv.Connector, error) {
	prefixes, err := cfg.Prefixes()
	if err != nil {
		return nil, err
	}
	return &storeConn{st: newKVStore(), prefixes: prefixes}, nil
}

// benchNames returns n connector names of the kind manifests hold.
func benchNames(n int) []string {
	known := []string{
		"LMCacheConnectorV1", "NixlConnector", "P2pNcclConnector", "MooncakeConnector",
		"SharedStorageConnector", "OffloadingConnector", "MultiConnector", "ExampleConnector",
		"filesystem", "memory", "redis", "s3",
	}
	backends := []string{"redis", "valkey", "s3", "gcs", "nvme", "rdma", "tcp", "shm", "disk", "memcached"}
	var names []string
	for i := 0; len(names) < n; i++ {
		if i < len(known) {
			names = append(names, known[i])
			continue
		}
		names = append(names, fmt.Sprintf("team%02d-%s-connector-v%d", i%37, backends[i%len(backends)], i/len(backends)))
	}
	return names
}

func benchEntries(names []string) []kv.Entry {
	entries := make([]kv.Entry, len(names))
	for i, name := range names {
		entries[i] = kv.Entry{
			Name:        name,
			ImportPath:  "example.com/connectors/" + name,
			Constructor: "New",
			Module:      "example.com/connectors",
			Factory:     newBenchConnector,
		}
	}
	return entries
}

var benchSizes = []int{10, 400}

// Sinks keep what the benchmarks make, as a server keeps its connector;
// otherwise a result could live on the stack, or its work be dropped.
var (
	created     kv.Connector
	lookedUp    kv.Factory
	lookedUpLen int
)

// viaFuncValue is the floor Create is held to: the constructor called
// through a function value, which is what a registry must do at the least.
// A package variable, so that the compiler cannot call it directly.
var viaFuncValue kv.Factory = newBenchConnector

// chunk is how many operations one side runs before the other takes its
// turn: enough to time with the monotonic clock, few enough that both
// sides see the same machine state.
const chunk = 256

// interleave runs each side chunk times per iteration, taking turns and
// changing who goes first every iteration, and reports each side's time
// per operation (the first side's as ns/op) and each other side's ratio to
// the first as first/other: a ratio of 1.05 reads "5% slower".
func interleave(b *testing.B, sides []string, run []func()) {
	b.Helper()
	total := make([]time.Duration, len(sides))
	for i := range run {
		run[i]() // warm up
	}
	iter := 0
	for b.Loop() {
		for k := range run {
			j := (k + iter) % len(run)
			start := time.Now()
			for range chunk {
				run[j]()
			}
			total[j] += time.Since(start)
		}
		iter++
	}
	ops := float64(b.N) * chunk
	b.ReportMetric(float64(total[0].Nanoseconds())/ops, "ns/op")
	for j := 1; j < len(sides); j++ {
		b.ReportMetric(float64(total[j].Nanoseconds())/ops, sides[j]+"-ns/op")
		b.ReportMetric(total[0].Seconds()/total[j].Seconds(), sides[0]+"/"+sides[j])
	}
}

// BenchmarkLookup compares, interleaved, Registry.Lookup and Table.Lookup
// with an unguarded map from name to factory (the floor) and with the
// RWMutex registry Go programs usually write by hand. Every side uses what
// it looked up.
func BenchmarkLookup(b *testing.B) {
	for _, n := range benchSizes {
		names := benchNames(n)
		name := names[n/2]
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			r := kv.MustNew(benchEntries(names)...)
			rw := &rwRegistry{m: map[string]kv.Factory{}}
			m := map[string]kv.Factory{}
			var plugins []registry.Plugin[kv.Factory]
			for _, nm := range names {
				rw.Register(nm, newBenchConnector)
				m[nm] = newBenchConnector
				plugins = append(plugins, registry.Plugin[kv.Factory]{Name: nm, Factory: newBenchConnector})
			}
			table := registry.MustNewTable("", plugins...)
			interleave(b, []string{"registry", "map", "rwmutex", "table"}, []func(){
				func() {
					e, ok := r.Lookup(name)
					if !ok {
						b.Fatal("not found")
					}
					lookedUp, lookedUpLen = e.Factory, len(e.ImportPath)
				},
				func() {
					f, ok := m[name]
					if !ok {
						b.Fatal("not found")
					}
					lookedUp, lookedUpLen = f, len(name)
				},
				func() {
					f, ok := rw.Lookup(name)
					if !ok {
						b.Fatal("not found")
					}
					lookedUp, lookedUpLen = f, len(name)
				},
				func() {
					f, ok := table.Lookup(name)
					if !ok {
						b.Fatal("not found")
					}
					lookedUp, lookedUpLen = f, len(name)
				},
			})
		})
	}
}

// BenchmarkCreate compares, interleaved, Registry.Create with a call of the
// same constructor through a function value (the floor), with a lookup in
// an unguarded map and a call (the floor of any registry by name) and with
// the RWMutex registry. The registry logs through a handler that drops
// creation records by level, as a deployment that logs warnings does.
func BenchmarkCreate(b *testing.B) {
	logger := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx := context.Background()
	for _, n := range benchSizes {
		names := benchNames(n)
		cfg := kv.Config{Connector: names[n/2], EngineID: "engine-0", KVRole: kv.KVBoth, BlockSize: 16}
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			r := kv.MustNew(benchEntries(names)...).WithLogger(logger)
			rw := &rwRegistry{m: map[string]kv.Factory{}}
			for _, nm := range names {
				rw.Register(nm, newBenchConnector)
			}
			create := func(f func(context.Context, kv.Config, kv.Role) (kv.Connector, error)) func() {
				return func() {
					c, err := f(ctx, cfg, kv.RoleWorker)
					if err != nil {
						b.Fatal(err)
					}
					created = c
				}
			}
			// mapcall looks the factory up in an unguarded map and calls
			// it: the least any registry by name can do.
			m := map[string]kv.Factory{}
			for _, nm := range names {
				m[nm] = newBenchConnector
			}
			mapCall := func(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
				return m[cfg.Connector](ctx, cfg, role)
			}
			interleave(b, []string{"registry", "funcvalue", "mapcall", "rwmutex"}, []func(){
				create(r.Create), create(viaFuncValue), create(mapCall), create(rw.Create),
			})
		})
	}
}
