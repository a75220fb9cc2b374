package filesystem

import (
	"context"

	"github.com/kvgen/kvgen/registry"
)

// KVStats returns what the connector counted since KVStats was first
// called: layers loaded, missed and saved, their bytes and latencies, and
// files that failed their checks (as ErrorCorrupt).
func (c *Connector) KVStats() registry.Stats { return c.stats.Stats() }

// ReportEvents reports a BlockStored event, on medium DISK, for each prefix
// whose last missing layer file a save of this connector wrote. Nothing is
// reported as removed: the connector deletes no layer file, and files that
// others delete are not watched.
func (c *Connector) ReportEvents(emit func(registry.KVEvent)) { c.emit.Set(emit) }

// SaveLayer writes kv to the layer's file for the prefix, replacing it
// atomically.
func (c *Connector) SaveLayer(ctx context.Context, req *registry.Request, layer string, numTokens int, kv []byte) error {
	start := c.stats.Start()
	emit := c.emit.Get()
	var h registry.BlockHash
	var had bool // the layer had a file before: a save over it completes nothing
	if emit != nil {
		var err error
		if h, err = c.hashes.Hash(req.PromptTokens, numTokens); err == nil {
			had = c.hasLayer(h, layer)
		}
	}
	if err := c.saveLayer(ctx, req, layer, numTokens, kv); err != nil {
		c.stats.Failed(registry.ErrorSave)
		return err
	}
	c.stats.Saved(start, len(kv))
	if emit != nil && !had && c.stored(h) {
		emit(c.prefixes.StoredEvent(req, numTokens, registry.MediumDisk))
	}
	return nil
}

// hasLayer reports whether layer has a file for the prefix.
func (c *Connector) hasLayer(h registry.BlockHash, layer string) bool {
	dir, err := c.openPrefix(h.String(), false)
	if err != nil {
		return false
	}
	defer dir.Close()
	_, err = dir.Lstat(fileName(layer))
	return err == nil
}

// AppendLayer is LoadLayer reading into dst's spare capacity, growing it if
// it is short. A file that fails its checks is a [registry.LoadError]
// naming every block of the prefix, which wraps [registry.ErrMiss].
func (c *Connector) AppendLayer(ctx context.Context, req *registry.Request, layer string, numTokens int, dst []byte) ([]byte, error) {
	start := c.stats.Start()
	out, err := c.appendLayer(ctx, req, layer, numTokens, dst)
	c.stats.LoadDone(start, len(out)-len(dst), err)
	return out, err
}
