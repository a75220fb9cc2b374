package manifest

import (
	"fmt"
	"strings"
	"testing"
)

// sizedManifest returns a manifest of distinct connectors just under size
// bytes.
func sizedManifest(size int) []byte {
	var b strings.Builder
	b.WriteString("version: 1\nconnectors:\n")
	for i := 0; ; i++ {
		entry := fmt.Sprintf("  - name: conn%d\n    import: example.com/connectors/conn%d\n    constructor: New\n    aliases: [Conn%dV1]\n", i, i, i)
		if b.Len()+len(entry) > size {
			return []byte(b.String())
		}
		b.WriteString(entry)
	}
}

// BenchmarkParseSize measures parsing the largest manifest kvgen reads,
// with its memory, next to refusing a 50 MB one.
func BenchmarkParseSize(b *testing.B) {
	largest := sizedManifest(MaxSize)
	huge := sizedManifest(50 << 20)
	for _, tc := range []struct {
		name string
		data []byte
	}{{"1MiB", largest}, {"50MB-refused", huge}} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(tc.data)))
			n := 0
			for b.Loop() {
				m, _ := Parse("connectors.yaml", tc.data)
				if m != nil {
					n += len(m.Entries)
				}
			}
			benchSink = n
		})
	}
}

var benchSink int
