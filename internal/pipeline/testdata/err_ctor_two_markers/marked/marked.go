package marked

import (
	"context"

	"example.com/kvcase/fake"
	"github.com/kvgen/kvgen/registry/kv"
)

// A makes one.
//
//kvgen:constructor
func A(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return fake.New(ctx, cfg, role)
}

// B makes another.
//
//kvgen:constructor
func B(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return fake.New(ctx, cfg, role)
}
