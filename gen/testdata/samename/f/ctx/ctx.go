// Package ctx is named like an identifier common in Go code, and returns a
// concrete type, so the generated code wraps its constructor.
package ctx

import (
	"context"

	"example.com/kvcase/fake"
	"github.com/kvgen/kvgen/registry"
)

// New creates the fake connector.
func New(ctx context.Context, cfg registry.Config, role registry.Role) (*fake.Conn, error) {
	return &fake.Conn{Role: role}, nil
}
