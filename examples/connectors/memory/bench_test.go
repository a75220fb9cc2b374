package memory_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/kvgen/kvgen/examples/connectors/memory"
	"github.com/kvgen/kvgen/registry/kv"
)

var sink kv.Connector

// BenchmarkCreate compares creating a memory connector through a registry
// with calling its constructor directly: the registry's cost next to a real
// constructor's. Each connector is closed, so the store is made anew each
// time, as it is when an engine starts.
func BenchmarkCreate(b *testing.B) {
	ctx := context.Background()
	cfg := kv.Config{Connector: "memory", EngineID: "engine-0", BlockSize: 16,
		LayerNames: []string{"model.layers.0.self_attn"}}
	b.Run("impl=registry", func(b *testing.B) {
		r := kv.MustNew(kv.Entry{Name: "memory", Factory: memory.New}).
			WithLogger(slog.New(slog.NewTextHandler(io.Discard, &slog.HandlerOptions{Level: slog.LevelError})))
		b.ReportAllocs()
		for b.Loop() {
			c, err := r.Create(ctx, cfg, kv.RoleWorker)
			if err != nil {
				b.Fatal(err)
			}
			c.Close()
			sink = c
		}
	})
	b.Run("impl=direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			c, err := memory.New(ctx, cfg, kv.RoleWorker)
			if err != nil {
				b.Fatal(err)
			}
			c.Close()
			sink = c
		}
	})
}
