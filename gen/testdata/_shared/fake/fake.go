// Package fake is a complete connector that golden cases wrap and import.
package fake

import (
	"context"

	"github.com/kvgen/kvgen/registry"
)

// Conn serves both roles and stores nothing.
type Conn struct{ Role registry.Role }

// New is a constructor with exactly registry.Factory's signature.
func New(ctx context.Context, cfg registry.Config, role registry.Role) (registry.Connector, error) {
	return &Conn{Role: role}, nil
}

func (c *Conn) Close() error { return nil }

func (c *Conn) MatchedTokens(ctx context.Context, req *registry.Request, numComputed int) (int, error) {
	return 0, nil
}

func (c *Conn) AfterAlloc(ctx context.Context, req *registry.Request, numExternal int) error {
	return nil
}

func (c *Conn) RequestFinished(ctx context.Context, req *registry.Request) error { return nil }

func (c *Conn) SaveLayer(ctx context.Context, req *registry.Request, layer string, numTokens int, kv []byte) error {
	return nil
}

func (c *Conn) LoadLayer(ctx context.Context, req *registry.Request, layer string, numTokens int) ([]byte, error) {
	return nil, registry.ErrMiss
}

func (c *Conn) WaitForSave(ctx context.Context) error { return nil }

func (c *Conn) Finished(ctx context.Context, finished []string) (sent, received []string, err error) {
	return finished, finished, nil
}
