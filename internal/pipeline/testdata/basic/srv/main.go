package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/kvgen/kvgen/registry/kv"
)

func main() {
	ctx := context.Background()
	reg := Registry.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	fmt.Println("names:", reg.Names())
	for _, e := range reg.Entries() {
		var roles []string
		for _, r := range kv.Roles() {
			if e.Serves(r.String()) {
				roles = append(roles, r.String())
			}
		}
		fmt.Printf("%s aliases=%v roles=%s import=%s.%s module=%s\n", e.Name, e.Aliases, strings.Join(roles, ","), e.ImportPath, e.Constructor, e.Module)
	}
	try := func(cfg kv.Config, role kv.Role) {
		c, err := reg.Create(ctx, cfg, role)
		if err != nil {
			fmt.Printf("create %s %s: error: %v\n", cfg.Connector, role, err)
			return
		}
		fmt.Printf("create %s %s: %T\n", cfg.Connector, role, c)
	}
	for _, name := range []string{"fake", "vllm.FakeConnector", "concrete", "value"} {
		for _, role := range kv.Roles() {
			try(kv.Config{Connector: name}, role)
		}
	}
	try(kv.Config{Connector: "concrete", Extra: map[string]any{"mode": "nil"}}, kv.RoleWorker)
	try(kv.Config{Connector: "concrete", Extra: map[string]any{"mode": "fail"}}, kv.RoleWorker)
	try(kv.Config{Connector: "fak"}, kv.RoleWorker)
	try(kv.Config{Connector: "MultiConnector", Extra: map[string]any{
		"connectors": []any{
			map[string]any{"kv_connector": "concrete"},
			map[string]any{"kv_connector": "Fake"},
		},
	}}, kv.RoleWorker)
}
