package filesystem_test

import (
	"context"
	"fmt"
	"os"

	"github.com/kvgen/kvgen/examples/connectors/filesystem"
	"github.com/kvgen/kvgen/registry/kv"
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
	cfg := kv.Config{
		BlockSize:  4,
		LayerNames: []string{"model.layers.0.self_attn"},
		Extra:      map[string]any{"shared_storage_path": dir},
	}
	prefill, err := filesystem.New(ctx, cfg, kv.RoleWorker)
	if err != nil {
		panic(err)
	}
	defer prefill.Close()
	decode, err := filesystem.New(ctx, cfg, kv.RoleScheduler)
	if err != nil {
		panic(err)
	}
	defer decode.Close()

	req := &kv.Request{ID: "req-1", PromptTokens: []uint32{1, 2, 3, 4, 5, 6}}
	if err := prefill.SaveLayer(ctx, req, "model.layers.0.self_attn", 4, []byte("kv of four tokens")); err != nil {
		panic(err)
	}
	n, _ := decode.MatchedTokens(ctx, req, 0)
	kvData, _ := decode.LoadLayer(ctx, req, "model.layers.0.self_attn", n)
	fmt.Printf("%d tokens: %s\n", n, kvData)
	// Output: 4 tokens: kv of four tokens
}
