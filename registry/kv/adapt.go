package kv

import "context"

// Adapt turns a constructor that returns a concrete connector type into a
// Factory. Generated code wraps such constructors with it; a nil pointer
// the constructor returns still reads as no connector, since Create checks.
func Adapt[C Connector](f func(context.Context, Config, Role) (C, error)) Factory {
	return func(ctx context.Context, cfg Config, role Role) (Connector, error) {
		return f(ctx, cfg, role)
	}
}
