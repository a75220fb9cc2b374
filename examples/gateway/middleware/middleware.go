// Package middleware is the plugin contract of the example gateway: a
// plugin wraps the handler after it in the chain, configured by its own
// JSON. A plugin's package need not import this one: any function of this
// signature fits.
package middleware

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Factory makes a plugin's handler: it serves a request itself, or passes
// it to next. cfg is the plugin's configuration, as the gateway's
// configuration gives it.
type Factory func(next http.Handler, cfg json.RawMessage) (http.Handler, error)

// Step is one plugin of a chain, as the gateway's configuration lists it.
type Step struct {
	Plugin string          `json:"plugin"`
	Config json.RawMessage `json:"config,omitempty"`
}

// Chain wraps final in the steps' plugins, the first step outermost;
// lookup finds a plugin's factory by name.
func Chain(lookup func(name string) (Factory, error), steps []Step, final http.Handler) (http.Handler, error) {
	h := final
	for i := len(steps) - 1; i >= 0; i-- {
		s := steps[i]
		f, err := lookup(s.Plugin)
		if err != nil {
			return nil, fmt.Errorf("step %d: %w", i+1, err)
		}
		if h, err = f(h, s.Config); err != nil {
			return nil, fmt.Errorf("step %d (%s): %w", i+1, s.Plugin, err)
		}
	}
	return h, nil
}
