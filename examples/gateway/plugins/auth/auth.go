// Package auth is a gateway plugin that admits requests bearing a known
// token.
package auth

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
)

// Bearer refuses, with 401, a request whose Authorization header does not
// bear one of the configured tokens: {"tokens": ["..."]}.
func Bearer(next http.Handler, cfg json.RawMessage) (http.Handler, error) {
	var c struct {
		Tokens []string `json:"tokens"`
	}
	if err := json.Unmarshal(cfg, &c); err != nil {
		return nil, err
	}
	if len(c.Tokens) == 0 {
		return nil, errors.New("auth: no tokens configured; every request would be refused")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		for _, t := range c.Tokens {
			if ok && subtle.ConstantTimeCompare([]byte(got), []byte(t)) == 1 {
				next.ServeHTTP(w, r)
				return
			}
		}
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	}), nil
}
