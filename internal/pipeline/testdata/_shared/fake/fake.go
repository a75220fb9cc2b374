// Package fake is a complete connector that golden cases wrap and import.
package fake

import (
	"context"

	"github.com/kvgen/kvgen/registry/kv"
)

// Conn serves both roles and stores nothing.
type Conn struct{ Role kv.Role }

// New is a constructor with exactly kv.Factory's signature.
func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return &Conn{Role: role}, nil
}

func (c *Conn) Close() error { return nil }

func (c *Conn) MatchedTokens(ctx context.Context, req *kv.Request, numComputed int) (int, error) {
	return 0, nil
}

func (c *Conn) AfterAlloc(ctx context.Context, req *kv.Request, numExternal int) error {
	return nil
}

func (c *Conn) RequestFinished(ctx context.Context, req *kv.Request) error { return nil }

func (c *Conn) SaveLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, kvData []byte) error {
	return nil
}

func (c *Conn) LoadLayer(ctx context.Context, req *kv.Request, layer string, numTokens int) ([]byte, error) {
	return nil, kv.ErrMiss
}

func (c *Conn) WaitForSave(ctx context.Context) error { return nil }

func (c *Conn) Finished(ctx context.Context, finished []string) (sent, received []string, err error) {
	return finished, finished, nil
}
