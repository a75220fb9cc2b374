package filesystem

import (
	"context"
	"encoding/hex"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// sweepStale removes temporary files older than grace, at once and then
// every grace, until the connector is closed.
func (c *Connector) sweepStale(grace time.Duration) {
	defer close(c.swept)
	tick := time.NewTicker(grace)
	defer tick.Stop()
	for {
		c.sweep(time.Now().Add(-grace))
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
	}
}

// sweep removes the temporary files in prefix directories last modified
// before cutoff. It looks only into plain directories named like a prefix
// hash, and removes only regular files named like its temporary files.
func (c *Connector) sweep(cutoff time.Time) {
	err := eachEntry(c.root, func(e fs.DirEntry) bool {
		select {
		case <-c.stop:
			return false
		default:
		}
		if e.IsDir() && isPrefixName(e.Name()) {
			c.sweepPrefix(e.Name(), cutoff)
		}
		return true
	})
	if err != nil {
		c.logger().Warn("sweeping stale temporary files", slog.String("dir", c.dir), slog.String("error", err.Error()))
	}
}

func (c *Connector) sweepPrefix(name string, cutoff time.Time) {
	dir, err := c.openPrefix(name, false)
	if err != nil {
		return
	}
	defer dir.Close()
	_ = eachEntry(dir, func(e fs.DirEntry) bool {
		select {
		case <-c.stop:
			return false
		default:
		}
		if !isTempFile(e.Name()) || !e.Type().IsRegular() {
			return true
		}
		fi, err := e.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			return true
		}
		// Remove unlinks the name, never what a link swapped in leads to.
		if err := dir.Remove(e.Name()); err == nil {
			c.logger().LogAttrs(context.Background(), slog.LevelInfo, "removed a stale temporary file",
				slog.String("dir", c.dir), slog.String("file", name+"/"+e.Name()), slog.Time("modified", fi.ModTime()))
		}
		return true
	})
}

// isPrefixName reports whether name is a prefix directory's: a block hash
// in lower-case hex.
func isPrefixName(name string) bool {
	return len(name) == hex.EncodedLen(len(kv.BlockHash{})) && strings.Trim(name, "0123456789abcdef") == ""
}
