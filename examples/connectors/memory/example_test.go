package memory_test

import (
	"context"
	"fmt"

	"github.com/kvgen/kvgen/examples/connectors/memory"
	"github.com/kvgen/kvgen/registry"
)

// The scheduler side and the worker side are created separately, as vLLM
// does, and meet in the store they both name.
func Example() {
	ctx := context.Background()
	reg := registry.MustNew(registry.Entry{Name: "memory", Factory: memory.New})
	cfg := registry.Config{
		Connector:  "memory",
		BlockSize:  4,
		LayerNames: []string{"model.layers.0.self_attn"},
		Extra:      map[string]any{"store": "example", "capacity_bytes": 1 << 20},
	}
	sched, err := reg.Create(ctx, cfg, registry.RoleScheduler)
	if err != nil {
		panic(err)
	}
	defer sched.Close()
	worker, err := reg.Create(ctx, cfg, registry.RoleWorker)
	if err != nil {
		panic(err)
	}
	defer worker.Close()

	req := &registry.Request{ID: "req-1", PromptTokens: []uint32{1, 2, 3, 4, 5, 6}}
	w := worker.(registry.Worker)
	if err := w.SaveLayer(ctx, req, "model.layers.0.self_attn", 4, []byte("kv of four tokens")); err != nil {
		panic(err)
	}
	n, _ := sched.(registry.Scheduler).MatchedTokens(ctx, req, 0)
	kv, _ := w.LoadLayer(ctx, req, "model.layers.0.self_attn", n)
	fmt.Printf("%d tokens: %s\n", n, kv)
	// Output: 4 tokens: kv of four tokens
}
