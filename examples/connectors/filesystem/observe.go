package filesystem

import (
	"context"
	"errors"

	"github.com/kvgen/kvgen/registry/kv"
)

// maxHeldBlocks bounds the blocks the connector remembers reporting
// stored, about 100 bytes each: past it, it reports AllBlocksCleared and
// starts over, so that memory does not grow with the directory.
const maxHeldBlocks = 1 << 18

// errStoreOnly is why the connector's events are store-only.
var errStoreOnly = errors.New("filesystem connector: store-only events: it deletes no layer file and does not watch the directory, so files deleted by others (an operator, a cleanup job) are never reported removed")

// KVStats returns what the connector counted since KVStats was first
// called: layers loaded, missed and saved, their bytes and latencies, and
// files that failed their checks (as ErrorCorrupt).
func (c *Connector) KVStats() kv.Stats { return c.stats.Stats() }

// ReportEvents reports a BlockStored event, on medium DISK, naming the
// blocks a prefix adds to those reported stored, when a save of this
// connector wrote the prefix's last missing layer file. Nothing is
// reported as removed ([Connector.ReportsRemovals]). Having reported
// 262144 blocks, it reports AllBlocksCleared and starts over, which
// bounds what it remembers.
func (c *Connector) ReportEvents(emit func(kv.KVEvent)) { c.emit.Set(emit) }

// ReportsRemovals says the connector's events are store-only: it deletes
// no layer file, and files that others delete are not watched.
func (c *Connector) ReportsRemovals() error { return errStoreOnly }

// SaveLayer writes kv to the layer's file for the prefix, replacing it
// atomically.
func (c *Connector) SaveLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, kvData []byte) error {
	start := c.stats.Start()
	emit := c.emit.Get()
	var h kv.BlockHash
	var had bool // the layer had a file before: a save over it completes nothing
	if emit != nil {
		var err error
		if h, err = c.hashes.Hash(req.PromptTokens, numTokens); err == nil {
			had = c.hasLayer(h, layer)
		}
	}
	if err := c.saveLayer(ctx, req, layer, numTokens, kvData); err != nil {
		c.stats.Failed(kv.ErrorSave)
		return err
	}
	c.stats.Saved(start, len(kvData))
	if emit != nil && !had && c.stored(h) {
		if c.held.Blocks() >= maxHeldBlocks {
			c.held.Cleared(emit)
		}
		c.held.Stored(req.PromptTokens[:numTokens], kv.MediumDisk, emit)
	}
	return nil
}

// hasLayer reports whether layer has a file for the prefix.
func (c *Connector) hasLayer(h kv.BlockHash, layer string) bool {
	dir, err := c.openPrefix(h.String(), false)
	if err != nil {
		return false
	}
	defer dir.Close()
	_, err = dir.Lstat(fileName(layer))
	return err == nil
}

// AppendLayer is LoadLayer reading into dst's spare capacity, growing it if
// it is short. A file that fails its checks is a [kv.LoadError]
// naming every block of the prefix, which wraps [kv.ErrMiss].
func (c *Connector) AppendLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, dst []byte) ([]byte, error) {
	start := c.stats.Start()
	out, err := c.appendLayer(ctx, req, layer, numTokens, dst)
	c.stats.LoadDone(start, len(out)-len(dst), err)
	return out, err
}
