package gen

import (
	"bytes"
	"fmt"
	"testing"

	goimports "golang.org/x/tools/imports"
)

// benchEntries are n entries with paths as long as a real module's, a
// tenth of them adapted.
func benchEntries(n int) []*Entry {
	entries := make([]*Entry, n)
	for i := range entries {
		p := fmt.Sprintf("github.com/example-org/kv-connectors/pkg/connectors/conn%04d", i)
		entries[i] = &Entry{Name: fmt.Sprintf("conn-%04d", i), ImportPath: p, PkgName: fmt.Sprintf("conn%04d", i),
			Constructor: "New", Module: "github.com/example-org/kv-connectors", Adapt: i%10 == 0}
	}
	return entries
}

// BenchmarkEmit renders registries of N entries.
func BenchmarkEmit(b *testing.B) {
	registryPackage(b)
	for _, n := range []int{400, 10000} {
		entries := benchEntries(n)
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			size := 0
			for b.Loop() {
				src, err := Render(newRenderInput("connectors.yaml", "kvcase", &kvContract, "desc", entries, map[string]bool{}))
				if err != nil {
					b.Fatal(err)
				}
				size += len(src)
			}
			b.ReportMetric(float64(size)/float64(b.N), "bytes/op")
		})
	}
}

// BenchmarkGroupImports compares the two ways of grouping the imports of
// the file jennifer renders, on the same file, one after the other: goimports
// formats the whole file again; groupImports rewrites the import block.
func BenchmarkGroupImports(b *testing.B) {
	registryPackage(b)
	for _, n := range []int{400, 10000} {
		src, err := Render(newRenderInput("connectors.yaml", "kvcase", &kvContract, "desc", benchEntries(n), map[string]bool{}))
		if err != nil {
			b.Fatal(err)
		}
		ways := map[string]func([]byte) ([]byte, error){
			"goimports": func(src []byte) ([]byte, error) {
				return goimports.Process("", src, &goimports.Options{FormatOnly: true, Comments: true, TabIndent: true, TabWidth: 8})
			},
			"block": groupImports,
		}
		for _, way := range []string{"goimports", "block"} {
			b.Run(fmt.Sprintf("N=%d/way=%s", n, way), func(b *testing.B) {
				for b.Loop() {
					out, err := ways[way](src)
					if err != nil || !bytes.Equal(out, src) {
						b.Fatalf("grouping changed a grouped file, or failed: %v", err)
					}
				}
			})
		}
	}
}
