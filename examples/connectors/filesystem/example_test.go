package filesystem_test

import (
	"context"
	"fmt"
	"os"

	"github.com/kvgen/kvgen/examples/connectors/filesystem"
	"github.com/kvgen/kvgen/registry"
)

// Two connectors on one directory, as a prefill process and a decode
// process would be: what one saves, the other finds and loads.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "kv")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	cfg := registry.Config{
		BlockSize:  4,
		LayerNames: []string{"model.layers.0.self_attn"},
		Extra:      map[string]any{"shared_storage_path": dir},
	}
	prefill, err := filesystem.New(ctx, cfg, registry.RoleWorker)
	if err != nil {
		panic(err)
	}
	defer prefill.Close()
	decode, err := filesystem.New(ctx, cfg, registry.RoleScheduler)
	if err != nil {
		panic(err)
	}
	defer decode.Close()

	req := &registry.Request{ID: "req-1", PromptTokens: []uint32{1, 2, 3, 4, 5, 6}}
	if err := prefill.SaveLayer(ctx, req, "model.layers.0.self_attn", 4, []byte("kv of four tokens")); err != nil {
		panic(err)
	}
	n, _ := decode.MatchedTokens(ctx, req, 0)
	kv, _ := decode.LoadLayer(ctx, req, "model.layers.0.self_attn", n)
	fmt.Printf("%d tokens: %s\n", n, kv)
	// Output: 4 tokens: kv of four tokens
}
