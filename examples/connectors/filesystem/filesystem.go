// Package filesystem is a KV connector that stores KV in files under a
// directory, with the semantics of vLLM's ExampleConnector.
//
// Its one setting (kv_connector_extra_config) is:
//
//   - shared_storage_path: the directory to store KV in, created if it is
//     missing. Required. Connectors that name the same directory, in one
//     process, in several, or on several machines sharing a file system, see
//     each other's KV.
//
// KV is keyed by the model (Config.Model) as well as the prompt, so engines
// of several models can share one directory without ever seeing each
// other's KV.
//
// Each saved prefix of a prompt gets a directory named by its chained block
// hash, which covers the model, and each layer a file in it named by the layer's escaped name. A
// file is written under a temporary name, synced and renamed into place, so
// a reader never sees half of one. It starts with a header that holds its
// length and SHA-256 checksums, checked on every load: a file that is
// corrupt, truncated or not one of ours is a miss and a logged warning,
// never wrong KV, and the next save of that layer replaces it.
package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/kvgen/kvgen/registry"
)

// Options are the connector's settings, decoded from
// kv_connector_extra_config.
type Options struct {
	// SharedStoragePath is the directory to store KV in.
	SharedStoragePath string `json:"shared_storage_path"`
}

// Connector stores KV in files. It serves both roles: it implements
// [registry.Scheduler] and [registry.Worker].
type Connector struct {
	// Logger receives a warning for every file that fails its checks. Set
	// it before the connector is used; nil means slog.Default().
	Logger *slog.Logger

	dir      string
	cfg      registry.Config
	prefixes registry.Prefixes // keys of this model's prompts
	closed   atomic.Bool
}

var (
	_ registry.Scheduler = (*Connector)(nil)
	_ registry.Worker    = (*Connector)(nil)
)

// errClosed is returned by calls on a closed connector.
var errClosed = errors.New("filesystem connector is closed")

// New creates a filesystem connector storing KV under the directory the
// setting shared_storage_path names, creating the directory if it is
// missing.
func New(ctx context.Context, cfg registry.Config, role registry.Role) (*Connector, error) {
	prefixes, err := cfg.Prefixes()
	if err != nil {
		return nil, err
	}
	var opts Options
	if err := registry.DecodeExtra(cfg.Extra, &opts); err != nil {
		return nil, err
	}
	if opts.SharedStoragePath == "" {
		return nil, errors.New("kv_connector_extra_config: shared_storage_path is required: the directory to store KV in")
	}
	if err := os.MkdirAll(opts.SharedStoragePath, 0o755); err != nil {
		return nil, fmt.Errorf("shared_storage_path: %w", err)
	}
	return &Connector{dir: opts.SharedStoragePath, cfg: cfg, prefixes: prefixes}, nil
}

// Close marks the connector closed; it holds no open files.
func (c *Connector) Close() error {
	c.closed.Store(true)
	return nil
}

// MatchedTokens returns the longest block-aligned prefix of the prompt
// whose layers all have a file, less numComputed. Files are checked when
// loaded, not here, so that the scheduler does not read every layer.
func (c *Connector) MatchedTokens(ctx context.Context, req *registry.Request, numComputed int) (int, error) {
	if c.closed.Load() {
		return 0, errClosed
	}
	return c.prefixes.Matched(ctx, req, numComputed, func(h registry.BlockHash) (bool, error) {
		return c.stored(h), nil
	})
}

// stored reports whether every configured layer has a file for the prefix,
// or, with no layers configured, whether any layer has.
func (c *Connector) stored(prefix registry.BlockHash) bool {
	dir := c.prefixDir(prefix)
	if len(c.cfg.LayerNames) == 0 {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false
		}
		return slices.ContainsFunc(entries, func(e fs.DirEntry) bool {
			return e.Type().IsRegular() && isLayerFile(e.Name())
		})
	}
	for _, l := range c.cfg.LayerNames {
		fi, err := os.Stat(filepath.Join(dir, fileName(l)))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() < headerLen {
			return false
		}
	}
	return true
}

// AfterAlloc does nothing: loads need no preparation.
func (c *Connector) AfterAlloc(ctx context.Context, req *registry.Request, numExternal int) error {
	return nil
}

// RequestFinished does nothing: the connector keeps no state per request.
func (c *Connector) RequestFinished(ctx context.Context, req *registry.Request) error {
	return nil
}

// SaveLayer writes kv to the layer's file for the prefix, replacing it
// atomically.
func (c *Connector) SaveLayer(ctx context.Context, req *registry.Request, layer string, numTokens int, kv []byte) error {
	if c.closed.Load() {
		return errClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if layer == "" {
		return errors.New("save: empty layer name")
	}
	h, err := c.prefixes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		return fmt.Errorf("save layer %q: %w", layer, err)
	}
	dir := c.prefixDir(h)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("save layer %q: %w", layer, err)
	}
	if err := writeFile(dir, fileName(layer), newHeader(h, layer, kv), kv); err != nil {
		return fmt.Errorf("save layer %q: %w", layer, err)
	}
	return nil
}

// LoadLayer reads the layer's file for the prefix and checks it. A missing
// file is a miss; a file that fails a check is a miss and a warning.
func (c *Connector) LoadLayer(ctx context.Context, req *registry.Request, layer string, numTokens int) ([]byte, error) {
	if c.closed.Load() {
		return nil, errClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	h, err := c.prefixes.Hash(req.PromptTokens, numTokens)
	if err != nil {
		return nil, fmt.Errorf("load layer %q: %w", layer, err)
	}
	path := filepath.Join(c.prefixDir(h), fileName(layer))
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("layer %q of a %d-token prefix: %w", layer, numTokens, registry.ErrMiss)
	}
	if err == nil {
		var kv []byte
		if kv, err = decode(data, h, layer); err == nil {
			return kv, nil
		}
	}
	c.logger().LogAttrs(ctx, slog.LevelWarn, "kv file unusable, treated as a miss",
		slog.String("file", path), slog.String("layer", layer), slog.String("reason", err.Error()))
	return nil, fmt.Errorf("%w: %s: %w", registry.ErrMiss, path, err)
}

// WaitForSave returns at once: saves complete before SaveLayer returns.
func (c *Connector) WaitForSave(ctx context.Context) error {
	if c.closed.Load() {
		return errClosed
	}
	return nil
}

// Finished reports every finished request as sent and received, since
// transfers complete synchronously.
func (c *Connector) Finished(ctx context.Context, finished []string) (sent, received []string, err error) {
	return slices.Clone(finished), slices.Clone(finished), nil
}

func (c *Connector) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}

// prefixDir is the directory of a prefix's layer files.
func (c *Connector) prefixDir(h registry.BlockHash) string {
	return filepath.Join(c.dir, h.String())
}

// writeFile writes header and kv to dir/name through a temporary file in
// the same directory, so that the rename replacing the file is atomic.
func writeFile(dir, name string, header, kv []byte) (err error) {
	// Temporary files start with a dot, which layer file names never do.
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(header); err != nil {
		return err
	}
	if _, err = f.Write(kv); err != nil {
		return err
	}
	// Synced before the rename, so that a crash leaves the old file or the
	// whole new one. The directory is not synced: a rename lost in a crash
	// costs a miss, which a cache can afford.
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), filepath.Join(dir, name))
}

// layerSuffix ends every layer file name.
const layerSuffix = ".kv"

func isLayerFile(name string) bool {
	return strings.HasSuffix(name, layerSuffix) && !strings.HasPrefix(name, ".")
}
