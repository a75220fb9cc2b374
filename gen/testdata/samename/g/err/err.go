// Package err returns a concrete type, so the generated code adapts it in a
// function whose parameters would shadow an import of the same name.
package err

import (
	"context"

	"example.com/kvcase/fake"
	"github.com/kvgen/kvgen/registry"
)

// New creates the fake connector.
func New(ctx context.Context, cfg registry.Config, role registry.Role) (*fake.Conn, error) {
	return &fake.Conn{Role: role}, nil
}
