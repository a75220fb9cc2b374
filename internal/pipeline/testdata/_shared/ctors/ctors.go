// Package ctors holds constructors that do not fit the contract, one way
// each, for the golden error cases.
package ctors

import (
	"context"

	"example.com/kvcase/fake"
	"github.com/kvgen/kvgen/registry/kv"
)

// NewConnector fits the contract; "NewConector" is a near miss of it.
func NewConnector(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return fake.New(ctx, cfg, role)
}

// newHidden is unexported.
func newHidden(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return fake.New(ctx, cfg, role)
}

var _ = newHidden

// Var is a variable of the right function type, not a function.
var Var kv.Factory = NewConnector

// Type is a type.
type Type struct{}

// Const is a constant.
const Const = 1

// StringConfig takes a string where kv.Config belongs.
func StringConfig(ctx context.Context, cfg string, role kv.Role) (kv.Connector, error) {
	return nil, nil
}

// StringError returns a string where error belongs.
func StringError(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, string) {
	return nil, ""
}

// TwoParams leaves out the role.
func TwoParams(ctx context.Context, cfg kv.Config) (kv.Connector, error) {
	return nil, nil
}

// OneResult returns no error.
func OneResult(ctx context.Context, cfg kv.Config, role kv.Role) kv.Connector {
	return nil
}

// Variadic takes its roles variadically.
func Variadic(ctx context.Context, cfg kv.Config, role ...kv.Role) (kv.Connector, error) {
	return nil, nil
}

// Generic is generic.
func Generic[T any](ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return nil, nil
}

// Int returns something that is not a connector.
func Int(ctx context.Context, cfg kv.Config, role kv.Role) (int, error) {
	return 0, nil
}

// WorkerOnly is a connector that serves only the worker role.
type WorkerOnly struct{ kv.Worker }

// NewWorkerOnly returns a type without the scheduler's methods.
func NewWorkerOnly(ctx context.Context, cfg kv.Config, role kv.Role) (*WorkerOnly, error) {
	return &WorkerOnly{}, nil
}

// BadClose has Close with the wrong signature.
type BadClose struct{}

// Close returns nothing.
func (BadClose) Close() {}

// NewBadClose returns a type whose Close does not return an error.
func NewBadClose(ctx context.Context, cfg kv.Config, role kv.Role) (BadClose, error) {
	return BadClose{}, nil
}
