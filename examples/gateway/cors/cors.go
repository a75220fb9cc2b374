// Package cors is a gateway plugin in a module of its own: it answers
// CORS preflight requests and marks responses to allowed origins. It
// imports neither kvgen nor the gateway: its constructor has the
// gateway's plugin signature, which is all the contract asks.
package cors

import (
	"encoding/json"
	"net/http"
	"slices"
)

// New allows the origins its configuration lists: {"origins": ["https://..."]}.
//
//kvgen:constructor
func New(next http.Handler, cfg json.RawMessage) (http.Handler, error) {
	var c struct {
		Origins []string `json:"origins"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, err
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" || !slices.Contains(c.Origins, origin) {
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Access-Control-Allow-Origin", origin)
		w.Header().Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			w.Header().Set("Access-Control-Allow-Methods", "GET, POST")
			w.WriteHeader(http.StatusNoContent)
			return
		}
		next.ServeHTTP(w, r)
	}), nil
}
