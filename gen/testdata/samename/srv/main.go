package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/kvgen/kvgen/registry"
)

func main() {
	reg := Registry.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, name := range reg.Names() {
		e, _ := reg.Lookup(name)
		_, err := reg.Create(context.Background(), registry.Config{Connector: name}, registry.RoleWorker)
		fmt.Println(name, e.ImportPath, err)
	}
}
