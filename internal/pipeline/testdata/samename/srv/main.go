package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/kvgen/kvgen/registry/kv"
)

func main() {
	reg := Registry.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, name := range reg.Names() {
		e, _ := reg.Lookup(name)
		_, err := reg.Create(context.Background(), kv.Config{Connector: name}, kv.RoleWorker)
		fmt.Println(name, e.ImportPath, err)
	}
}
