package filesystem

import (
	"context"
	"errors"
	"io"
	"os"
	"syscall"

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
// connector wrote the prefix's last layer file that a load would not
// take (missing, or failing a load's header checks), and every other
// layer's file passes those checks. Nothing is
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
	var had bool // the layer had a good file before: a save over it completes nothing
	if emit != nil {
		var err error
		if h, err = c.hashes.Hash(req.PromptTokens, numTokens); err == nil {
			had = c.loadable(h, layer, numTokens)
		}
	}
	if err := c.saveLayer(ctx, req, layer, numTokens, kvData); err != nil {
		c.stats.Failed(kv.ErrorSave)
		return err
	}
	c.stats.Saved(start, len(kvData))
	// stored looks at the files' names and sizes only; a prefix is
	// reported once its other layers' headers say a load would take them
	// too, so that a stranger's file at a layer's name reports nothing.
	if emit != nil && !had && c.stored(h) && c.othersLoadable(h, layer, numTokens) {
		if c.held.Blocks() >= maxHeldBlocks {
			c.held.Cleared(emit)
		}
		c.held.Stored(req.PromptTokens[:numTokens], kv.MediumDisk, emit)
	}
	return nil
}

// loadable reports whether layer's file for the prefix h of numTokens
// tokens passes the checks a load makes before it reads the KV: a regular
// file whose header was written for this prefix and layer, whose size is
// the header's, within what a load of numTokens tokens takes.
func (c *Connector) loadable(h kv.BlockHash, layer string, numTokens int) bool {
	dir, err := c.openPrefix(h.String(), false)
	if err != nil {
		return false
	}
	defer dir.Close()
	return c.loadableIn(dir, h, layer, numTokens)
}

// othersLoadable reports whether every configured layer but saved has a
// loadable file for the prefix h of numTokens tokens.
func (c *Connector) othersLoadable(h kv.BlockHash, saved string, numTokens int) bool {
	dir, err := c.openPrefix(h.String(), false)
	if err != nil {
		return false
	}
	defer dir.Close()
	for _, l := range c.cfg.LayerNames {
		if l != saved && !c.loadableIn(dir, h, l, numTokens) {
			return false
		}
	}
	return true
}

func (c *Connector) loadableIn(dir *os.Root, h kv.BlockHash, layer string, numTokens int) bool {
	f, fi, err := openPlain(dir, fileName(layer), os.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return false
	}
	defer f.Close()
	var hdr [headerLen]byte
	if size := fi.Size() - headerLen; size < 0 || size > c.maxLayer || size > c.limit(numTokens) {
		return false
	}
	if _, err := io.ReadFull(f, hdr[:]); err != nil {
		return false
	}
	_, err = checkHeader(hdr[:], fi.Size(), h, layer)
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
