package memory_test

import (
	"context"
	"slices"
	"testing"

	"github.com/kvgen/kvgen/examples/connectors/internal/kvbench"
	"github.com/kvgen/kvgen/examples/connectors/memory"
	"github.com/kvgen/kvgen/registry/kv"
)

// BenchmarkSaveLoad saves a request's 32 layers and loads them back,
// through the connector and through its floor in turn, every iteration:
// the floor copies the same bytes into fresh buffers, kept until the load
// as the store keeps them, and copies them out into fresh buffers.
// "connector" loads with LoadLayer, "append" with AppendLayer into one
// buffer per request that is reused. Each round opens a store and closes
// it after, untimed, so that only one side's layers are in memory at once.
func BenchmarkSaveLoad(b *testing.B) {
	for _, c := range kvbench.Cases() {
		b.Run(c.Name, func(b *testing.B) {
			n := len(c.Requests)
			floor := kvbench.Side{Name: "floor", Start: func() (func(int) error, func()) {
				held := make([][][]byte, n)
				return func(i int) error {
					held[i] = make([][]byte, kvbench.Layers)
					for l := range held[i] {
						held[i][l] = slices.Clone(c.KV)
					}
					for l := range held[i] {
						kvbench.Use(slices.Clone(held[i][l]))
					}
					return nil
				}, func() {}
			}}
			open := func() kv.Worker { return open(b, c.Bytes, n) }
			closeStore := func(w kv.Worker) { w.Close() }
			kvbench.Pair(b, c, append([]kvbench.Side{floor}, kvbench.WorkerSides(c, open, closeStore)...)...)
		})
	}
}

// open returns a worker whose store holds n requests of layers of size
// bytes.
func open(b *testing.B, size, n int) kv.Worker {
	c, err := memory.New(context.Background(), kv.Config{
		BlockSize:  kvbench.BlockSize,
		LayerNames: kvbench.LayerNames(),
		Extra: map[string]any{
			"store":          b.Name(),
			"capacity_bytes": n * kvbench.Layers * (size + 1024),
		},
	}, kv.RoleWorker)
	if err != nil {
		b.Fatal(err)
	}
	return c.(kv.Worker)
}
