// Package value has a constructor that returns a struct value.
package value

import (
	"context"

	"example.com/kvcase/fake"
	"github.com/kvgen/kvgen/registry/kv"
)

// Conn is a scheduler-side connector held by value.
type Conn struct{ fake.Conn }

// Close releases nothing.
func (Conn) Close() error { return nil }

// MatchedTokens reports one block.
func (Conn) MatchedTokens(ctx context.Context, req *kv.Request, numComputed int) (int, error) {
	return 16, nil
}

// AfterAlloc does nothing.
func (Conn) AfterAlloc(ctx context.Context, req *kv.Request, numExternal int) error { return nil }

// RequestFinished does nothing.
func (Conn) RequestFinished(ctx context.Context, req *kv.Request) error { return nil }

// Open returns the connector by value.
func Open(ctx context.Context, cfg kv.Config, role kv.Role) (Conn, error) {
	return Conn{}, nil
}
