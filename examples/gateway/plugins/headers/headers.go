// Package headers is a gateway plugin that sets response headers.
package headers

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// New sets the headers its configuration maps names to on every response.
//
//kvgen:constructor
func New(next http.Handler, cfg json.RawMessage) (http.Handler, error) {
	var set map[string]string
	if err := json.Unmarshal(cfg, &set); err != nil {
		return nil, fmt.Errorf("headers: want an object of header names to values: %w", err)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for k, v := range set {
			w.Header().Set(k, v)
		}
		next.ServeHTTP(w, r)
	}), nil
}
