// Package contract holds plugin contracts other than the KV connector's,
// and types that cannot be one, for the golden cases of factory:.
package contract

import (
	"encoding/json"
	"net/http"
)

// Middleware is a contract of a named function type.
type Middleware func(next http.Handler, cfg json.RawMessage) (http.Handler, error)

// Plugin is a contract of an interface: constructors return it.
type Plugin interface {
	Name() string
}

// Options is a struct, which cannot be a contract.
type Options struct{ Verbose bool }

// Generic is a generic function type, which cannot be a contract.
type Generic[T any] func(cfg T) (http.Handler, error)

// NewMiddleware is a function, not a type.
func NewMiddleware() {}
