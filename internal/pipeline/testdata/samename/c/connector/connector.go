// Package connector wraps the fake connector.
package connector

import (
	"context"

	"example.com/kvcase/fake"
	"github.com/kvgen/kvgen/registry/kv"
)

// New creates the fake connector.
func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return fake.New(ctx, cfg, role)
}
