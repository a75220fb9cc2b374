package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/kvgen/kvgen/registry"
)

func main() {
	ctx := context.Background()
	reg := Registry.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	fmt.Println("names:", reg.Names())
	for _, e := range reg.Entries() {
		fmt.Printf("%s aliases=%v roles=%s import=%s.%s module=%s\n", e.Name, e.Aliases, e.Roles, e.ImportPath, e.Constructor, e.Module)
	}
	try := func(cfg registry.Config, role registry.Role) {
		c, err := reg.Create(ctx, cfg, role)
		if err != nil {
			fmt.Printf("create %s %s: error: %v\n", cfg.Connector, role, err)
			return
		}
		fmt.Printf("create %s %s: %T\n", cfg.Connector, role, c)
	}
	for _, name := range []string{"fake", "vllm.FakeConnector", "concrete", "value"} {
		for _, role := range registry.Roles() {
			try(registry.Config{Connector: name}, role)
		}
	}
	try(registry.Config{Connector: "concrete", Extra: map[string]any{"mode": "nil"}}, registry.RoleWorker)
	try(registry.Config{Connector: "concrete", Extra: map[string]any{"mode": "fail"}}, registry.RoleWorker)
	try(registry.Config{Connector: "fak"}, registry.RoleWorker)
	try(registry.Config{Connector: "MultiConnector", Extra: map[string]any{
		"connectors": []any{
			map[string]any{"kv_connector": "concrete"},
			map[string]any{"kv_connector": "Fake"},
		},
	}}, registry.RoleWorker)
}
