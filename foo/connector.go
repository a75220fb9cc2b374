// Package foo is a KV connector for kvgen. Replace its file store with
// the service it should talk to; the conformance test keeps it honest.
package foo

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kvgen/kvgen/registry"
)

// Options are the connector's settings, read from
// kv_connector_extra_config.
type Options struct {
	// Path is the directory the KV is kept in.
	Path string `json:"path"`
}

// Connector serves both the scheduler and the worker role.
type Connector struct {
	opts      Options
	blockSize int
	layers    []string
}

// New creates the connector for one role.
//
//kvgen:constructor
func New(ctx context.Context, cfg registry.Config, role registry.Role) (registry.Connector, error) {
	var opts Options
	if err := registry.DecodeExtra(cfg.Extra, &opts); err != nil {
		return nil, err
	}
	if opts.Path == "" {
		return nil, errors.New(`kv_connector_extra_config: "path" is required`)
	}
	if err := os.MkdirAll(opts.Path, 0o755); err != nil {
		return nil, err
	}
	return &Connector{opts: opts, blockSize: cfg.BlockSize, layers: cfg.LayerNames}, nil
}

// file is where a layer's KV for the prefix that h identifies is kept.
func (c *Connector) file(h registry.BlockHash, layer string) string {
	return filepath.Join(c.opts.Path, fmt.Sprintf("%s-%x.kv", h, layer))
}

func (c *Connector) prefixFile(req *registry.Request, layer string, numTokens int) (string, error) {
	h, err := registry.PrefixHash(req.PromptTokens, c.blockSize, numTokens)
	if err != nil {
		return "", err
	}
	return c.file(h, layer), nil
}

// stored reports whether every layer of the prefix is kept, or any layer
// when no layers are configured.
func (c *Connector) stored(h registry.BlockHash) (bool, error) {
	if len(c.layers) == 0 {
		matches, err := filepath.Glob(filepath.Join(c.opts.Path, h.String()+"-*.kv"))
		return len(matches) > 0, err
	}
	for _, l := range c.layers {
		if _, err := os.Stat(c.file(h, l)); errors.Is(err, fs.ErrNotExist) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	return true, nil
}

// MatchedTokens returns how many tokens beyond numComputed are stored.
func (c *Connector) MatchedTokens(ctx context.Context, req *registry.Request, numComputed int) (int, error) {
	return registry.MatchedTokens(ctx, req, c.blockSize, numComputed, c.stored)
}

// AfterAlloc is called once blocks are allocated for req.
func (c *Connector) AfterAlloc(ctx context.Context, req *registry.Request, numExternal int) error {
	return nil
}

// RequestFinished is called when req is done.
func (c *Connector) RequestFinished(ctx context.Context, req *registry.Request) error { return nil }

// SaveLayer stores one layer's KV for the first numTokens prompt tokens.
func (c *Connector) SaveLayer(ctx context.Context, req *registry.Request, layer string, numTokens int, kv []byte) error {
	name, err := c.prefixFile(req, layer, numTokens)
	if err != nil {
		return err
	}
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, kv, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// LoadLayer returns one layer's KV for the first numTokens prompt tokens.
func (c *Connector) LoadLayer(ctx context.Context, req *registry.Request, layer string, numTokens int) ([]byte, error) {
	name, err := c.prefixFile(req, layer, numTokens)
	if err != nil {
		return nil, err
	}
	kv, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", layer, registry.ErrMiss)
	}
	return kv, err
}

// WaitForSave returns at once: saves are synchronous.
func (c *Connector) WaitForSave(ctx context.Context) error { return nil }

// Finished reports every finished request as done: transfers are
// synchronous.
func (c *Connector) Finished(ctx context.Context, finished []string) (sent, received []string, err error) {
	return finished, finished, nil
}

// Close releases the connector; it holds nothing open.
func (c *Connector) Close() error { return nil }
