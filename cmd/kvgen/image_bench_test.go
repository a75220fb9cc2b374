package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// BenchmarkBuildImage pairs, in each iteration, a deployment build, the
// same build with -image to an OCI layout, and compressing the binary
// once, as the image's layer does. image/(build+gzip) is the ratio of the
// second to the sum of the other two: what -image costs over build is the
// compression and little else.
func BenchmarkBuildImage(b *testing.B) {
	b.Chdir(kvgentest.Module(b, "example.com/bench", map[string]string{
		"connectors.yaml": "version: 1\noutput: host/connectors_gen.go\nconnectors:\n  - name: memory\n    import: github.com/kvgen/kvgen/examples/connectors/memory\n    constructor: New\n",
		"host/main.go":    "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(Registry.Names()) }\n",
	}))
	kvgen := func(args ...string) {
		b.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), args, &stdout, &stderr); code != 0 {
			b.Fatalf("kvgen %q: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
		}
	}
	target := "linux/" + runtime.GOARCH
	b.Setenv("CGO_ENABLED", "0") // as -image builds without a base
	kvgen("generate")
	build := []string{"build", "-manifest", "connectors.yaml", "-target", target, "-o", "bin/host", "./host"}
	image := []string{"build", "-manifest", "connectors.yaml", "-target", target, "-image", "oci:img", "./host"}
	kvgen(build...) // the build cache, warm for both
	kvgen(image...)
	var tBuild, tImage, tGzip time.Duration
	for b.Loop() {
		// The go command leaves a binary that is up to date as it is;
		// -image builds one afresh each time, in a directory of its own.
		if err := os.Remove("bin/host"); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		kvgen(build...)
		tBuild += time.Since(start)

		start = time.Now()
		kvgen(image...)
		tImage += time.Since(start)

		start = time.Now()
		gzipFile(b, "bin/host")
		tGzip += time.Since(start)
	}
	b.ReportMetric(float64(tImage)/float64(tBuild+tGzip), "image/(build+gzip)")
	b.ReportMetric(float64(tBuild.Milliseconds())/float64(b.N), "build-ms/op")
	b.ReportMetric(float64(tImage.Milliseconds())/float64(b.N), "image-ms/op")
	b.ReportMetric(float64(tGzip.Milliseconds())/float64(b.N), "gzip-ms/op")
}

// gzipFile compresses a file as the image's layer is, to nowhere.
func gzipFile(b *testing.B, name string) {
	f, err := os.Open(name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(zw, f); err != nil {
		b.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		b.Fatal(err)
	}
}
