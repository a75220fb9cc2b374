// Package err is named like an identifier common in Go code, and returns a
// concrete type, so the generated code wraps its constructor.
package err

import (
	"context"

	"example.com/kvcase/fake"
	"github.com/kvgen/kvgen/registry/kv"
)

// New creates the fake connector.
func New(ctx context.Context, cfg kv.Config, role kv.Role) (*fake.Conn, error) {
	return &fake.Conn{Role: role}, nil
}
