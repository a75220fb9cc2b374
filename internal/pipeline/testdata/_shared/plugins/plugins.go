// Package plugins holds constructors for the contracts of package
// contract: those that fit, and those that do not, one way each.
package plugins

import (
	"encoding/json"
	"net/http"

	"example.com/kvcase/contract"
)

// Header fits contract.Middleware: it sets a response header.
func Header(next http.Handler, cfg json.RawMessage) (http.Handler, error) {
	var c struct{ Name, Value string }
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(c.Name, c.Value)
		next.ServeHTTP(w, r)
	}), nil
}

// TwoParams has a parameter too few.
func TwoParams(next http.Handler) (http.Handler, error) { return next, nil }

// WrongParam takes a string where the contract takes json.RawMessage.
func WrongParam(next http.Handler, cfg string) (http.Handler, error) { return next, nil }

// Variadic takes its configuration as a variadic parameter.
func Variadic(next http.Handler, cfg ...json.RawMessage) (http.Handler, error) { return next, nil }

// OneResult returns no error.
func OneResult(next http.Handler, cfg json.RawMessage) http.Handler { return next }

// StringError returns a string where the contract returns an error.
func StringError(next http.Handler, cfg json.RawMessage) (http.Handler, string) { return next, "" }

// Concrete returns a type that implements http.Handler, but is not one.
func Concrete(next http.Handler, cfg json.RawMessage) (http.HandlerFunc, error) {
	return next.ServeHTTP, nil
}

// Generic is a generic constructor.
func Generic[T any](next http.Handler, cfg json.RawMessage) (http.Handler, error) { return next, nil }

// Var is a variable of the contract's type, not a function.
var Var contract.Middleware = Header

// named is a contract.Plugin.
type named string

func (n named) Name() string { return string(n) }

// NewPlugin returns the contract's interface.
func NewPlugin() contract.Plugin { return named("plugin") }

// NewNamed returns a concrete type that implements contract.Plugin.
func NewNamed() named { return named("named") }

// NewString returns a type that does not implement contract.Plugin.
func NewString() string { return "" }

// NewWithArg takes an argument, which an interface contract's
// constructors do not.
func NewWithArg(name string) contract.Plugin { return named(name) }
