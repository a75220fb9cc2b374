package memory

import (
	"testing"

	"github.com/kvgen/kvgen/registry"
)

// BenchmarkStatsCost saves and loads a 64 KiB layer with the stats unread
// (off: nothing counted) and read (on: counted and timed), in one run, so
// that the two compare on the same machine state.
func BenchmarkStatsCost(b *testing.B) {
	for _, on := range []bool{false, true} {
		name := "off"
		if on {
			name = "on"
		}
		b.Run(name, func(b *testing.B) {
			c := open(b, b.Name(), 0, "l0")
			if on {
				c.KVStats()
			}
			req := &registry.Request{ID: "r", PromptTokens: make([]uint32, 512)}
			kv := make([]byte, 64<<10)
			buf := make([]byte, 0, len(kv))
			ctx := b.Context()
			b.SetBytes(int64(2 * len(kv)))
			b.ReportAllocs()
			for b.Loop() {
				if err := c.SaveLayer(ctx, req, "l0", 512, kv); err != nil {
					b.Fatal(err)
				}
				var err error
				if buf, err = c.AppendLayer(ctx, req, "l0", 512, buf[:0]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
