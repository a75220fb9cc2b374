package registry_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"

	"github.com/kvgen/kvgen/registry"
)

// rwRegistry is the registry most Go programs write by hand (database/sql's
// drivers, and many plugin registries): a map filled by Register calls,
// usually from init functions, guarded by a sync.RWMutex because
// registration and lookup may race.
type rwRegistry struct {
	mu sync.RWMutex
	m  map[string]registry.Factory
}

func (r *rwRegistry) Register(name string, f registry.Factory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[name]; dup {
		panic("register called twice for connector " + name)
	}
	r.m[name] = f
}

func (r *rwRegistry) Lookup(name string) (registry.Factory, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	f, ok := r.m[name]
	return f, ok
}

func (r *rwRegistry) Create(ctx context.Context, cfg registry.Config, role registry.Role) (registry.Connector, error) {
	f, ok := r.Lookup(cfg.Connector)
	if !ok {
		return nil, fmt.Errorf("unknown connector %q", cfg.Connector)
	}
	return f(ctx, cfg, role)
}

// newBenchConnector is a constructor of the size real ones have: it
// allocates the connector and the (empty) maps and lock of its store.
func newBenchConnector(_ context.Context, cfg registry.Config, _ registry.Role) (registry.Connector, error) {
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

func benchEntries(names []string) []registry.Entry {
	entries := make([]registry.Entry, len(names))
	for i, name := range names {
		entries[i] = registry.Entry{
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

// created keeps what the Create benchmarks make, as a server keeps its
// connector; otherwise the direct call's result could live on the stack.
var created registry.Connector

func BenchmarkLookup(b *testing.B) {
	for _, n := range benchSizes {
		names := benchNames(n)
		name := names[n/2]

		b.Run(fmt.Sprintf("entries=%d/impl=registry", n), func(b *testing.B) {
			r := registry.MustNew(benchEntries(names)...)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := r.Lookup(name); !ok {
					b.Fatal("not found")
				}
			}
		})
		b.Run(fmt.Sprintf("entries=%d/impl=rwmutex", n), func(b *testing.B) {
			r := &rwRegistry{m: map[string]registry.Factory{}}
			for _, nm := range names {
				r.Register(nm, newBenchConnector)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := r.Lookup(name); !ok {
					b.Fatal("not found")
				}
			}
		})
		// The floor: an unguarded map from name to factory.
		b.Run(fmt.Sprintf("entries=%d/impl=map", n), func(b *testing.B) {
			m := map[string]registry.Factory{}
			for _, nm := range names {
				m[nm] = newBenchConnector
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := m[name]; !ok {
					b.Fatal("not found")
				}
			}
		})
	}
}

func BenchmarkCreate(b *testing.B) {
	// Creation records are dropped by level, as in a deployment that
	// logs warnings only.
	logger := slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError}))
	ctx := context.Background()
	for _, n := range benchSizes {
		names := benchNames(n)
		cfg := registry.Config{Connector: names[n/2], EngineID: "engine-0", KVRole: registry.KVBoth, BlockSize: 16}

		b.Run(fmt.Sprintf("entries=%d/impl=registry", n), func(b *testing.B) {
			r := registry.MustNew(benchEntries(names)...).WithLogger(logger)
			b.ReportAllocs()
			for b.Loop() {
				c, err := r.Create(ctx, cfg, registry.RoleWorker)
				if err != nil {
					b.Fatal(err)
				}
				created = c
			}
		})
		b.Run(fmt.Sprintf("entries=%d/impl=rwmutex", n), func(b *testing.B) {
			r := &rwRegistry{m: map[string]registry.Factory{}}
			for _, nm := range names {
				r.Register(nm, newBenchConnector)
			}
			b.ReportAllocs()
			for b.Loop() {
				c, err := r.Create(ctx, cfg, registry.RoleWorker)
				if err != nil {
					b.Fatal(err)
				}
				created = c
			}
		})
		// What generated code would do without a registry: call the
		// constructor by name.
		b.Run(fmt.Sprintf("entries=%d/impl=direct", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c, err := newBenchConnector(ctx, cfg, registry.RoleWorker)
				if err != nil {
					b.Fatal(err)
				}
				created = c
			}
		})
	}
}
