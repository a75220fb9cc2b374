// Package marked marks its constructor, for entries that leave it out.
package marked

import (
	"encoding/json"
	"net/http"
)

// New passes requests through unchanged.
//
//kvgen:constructor
func New(next http.Handler, cfg json.RawMessage) (http.Handler, error) { return next, nil }
