package memory

import (
	"testing"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// BenchmarkStatsCost saves and loads a 64 KiB layer through two memory
// connectors, one whose stats are never read (off: nothing counted) and
// one whose stats were read once (on: counted and timed), alternating
// every iteration, and reports each side's time and their ratio.
func BenchmarkStatsCost(b *testing.B) {
	type side struct {
		c     *connector
		total time.Duration
	}
	off := &side{c: open(b, b.Name()+"/off", 0, "l0")}
	on := &side{c: open(b, b.Name()+"/on", 0, "l0")}
	on.c.KVStats() // read once: from here on it counts
	req := &kv.Request{ID: "r", PromptTokens: make([]uint32, 512)}
	kvData := make([]byte, 64<<10)
	buf := make([]byte, 0, len(kvData))
	ctx := b.Context()
	b.SetBytes(int64(2 * len(kvData)))
	b.ReportAllocs()
	// The two sides alternate every iteration, each going first in turn,
	// so that both see the same machine.
	sides := [2]*side{off, on}
	for i := 0; b.Loop(); i++ {
		for j := range sides {
			s := sides[(i+j)%2]
			start := time.Now()
			if err := s.c.SaveLayer(ctx, req, "l0", 512, kvData); err != nil {
				b.Fatal(err)
			}
			var err error
			if buf, err = s.c.AppendLayer(ctx, req, "l0", 512, buf[:0]); err != nil {
				b.Fatal(err)
			}
			s.total += time.Since(start)
		}
	}
	if len(buf) != len(kvData) {
		b.Fatalf("loaded %d bytes, saved %d", len(buf), len(kvData))
	}
	ns := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(b.N) }
	b.ReportMetric(ns(off.total), "off-ns/op")
	b.ReportMetric(ns(on.total), "on-ns/op")
	b.ReportMetric(float64(on.total)/float64(off.total), "on/off")
}
