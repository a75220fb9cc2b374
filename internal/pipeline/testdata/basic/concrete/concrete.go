// Package concrete has a constructor that returns a concrete type and is
// found through its marker.
package concrete

import (
	"context"
	"errors"

	"example.com/kvcase/fake"
	"github.com/kvgen/kvgen/registry/kv"
)

// Conn is a worker-side connector.
type Conn struct{ *fake.Conn }

// Open is not the constructor.
func Open() {}

// New returns a nil *Conn with no error when asked to, which the generated
// adapter must turn into a nil Connector.
//
//kvgen:constructor
func New(ctx context.Context, cfg kv.Config, role kv.Role) (*Conn, error) {
	switch cfg.Extra["mode"] {
	case "nil":
		return nil, nil
	case "fail":
		return nil, errors.New("no backend")
	}
	return &Conn{&fake.Conn{Role: role}}, nil
}
