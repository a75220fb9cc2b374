package memory_test

import (
	"context"
	"fmt"

	"github.com/kvgen/kvgen/examples/connectors/memory"
	"github.com/kvgen/kvgen/registry/kv"
)

// The scheduler side and the worker side are created separately, as vLLM
// does, and meet in the store they both name.
func Example() {
	ctx := context.Background()
	reg := kv.MustNew(kv.Entry{Name: "memory", Factory: memory.New})
	cfg := kv.Config{
		Connector:  "memory",
		BlockSize:  4,
		LayerNames: []string{"model.layers.0.self_attn"},
		Extra:      map[string]any{"store": "example", "capacity_bytes": 1 << 20},
	}
	sched, err := reg.Create(ctx, cfg, kv.RoleScheduler)
	if err != nil {
		panic(err)
	}
	defer sched.Close()
	worker, err := reg.Create(ctx, cfg, kv.RoleWorker)
	if err != nil {
		panic(err)
	}
	defer worker.Close()

	req := &kv.Request{ID: "req-1", PromptTokens: []uint32{1, 2, 3, 4, 5, 6}}
	w := worker.(kv.Worker)
	if err := w.SaveLayer(ctx, req, "model.layers.0.self_attn", 4, []byte("kv of four tokens")); err != nil {
		panic(err)
	}
	n, _ := sched.(kv.Scheduler).MatchedTokens(ctx, req, 0)
	kvData, _ := w.LoadLayer(ctx, req, "model.layers.0.self_attn", n)
	fmt.Printf("%d tokens: %s\n", n, kvData)
	// Output: 4 tokens: kv of four tokens
}
