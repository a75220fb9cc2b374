package deploy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// BenchmarkBuild compares `kvgen build` of the datacenter deployment with
// a plain `go build` of the same program in a copy of the module whose
// go.mod already requires the Redis connector and whose committed registry
// is the datacenter one: the cost of building without touching the tree.
// Both copies are built once before timing, so every build has warm caches;
// each iteration runs both builds, so they see the same machine load.
func BenchmarkBuild(b *testing.B) {
	root := kvgentest.Root(b)
	kvgen := kvgentest.KVGen(b)
	env := []string{goFlags()}
	custom := kvserverDir(copyModule(b, root))
	plain := kvserverDir(copyModule(b, root))

	// The plain copy gets by hand what kvgen build does in temporary files.
	mustRun(b, plain, env, "go", "mod", "edit",
		"-require="+redisModule+"@v0.1.0", "-replace="+redisModule+"=../external/redis")
	mustRun(b, plain, env, "go", "get", redisModule+"@v0.1.0")
	mustRun(b, plain, env, kvgen, "-manifest", "deploy/datacenter.yaml", "-o", "connectors_gen.go")

	out := b.TempDir()
	customBin, plainBin := filepath.Join(out, "kvserver-custom"), filepath.Join(out, "kvserver-plain")
	customBuild := []string{kvgen, "build", "-manifest", "deploy/datacenter.yaml", "-o", customBin, "."}
	plainBuild := []string{"go", "build", "-trimpath", "-o", plainBin, "."}
	mustRun(b, custom, env, customBuild...)
	mustRun(b, plain, env, plainBuild...)
	// The same connectors must be linked, or the comparison is void.
	require.Equal(b, listConnectorNames(b, plainBin), listConnectorNames(b, customBin))

	// A deployment build usually writes a new binary. Over an up-to-date
	// one the go command skips the link, which leaves only what kvgen
	// build adds to go build.
	for _, fresh := range []bool{true, false} {
		name := "up-to-date"
		if fresh {
			name = "new-binary"
		}
		b.Run(name, func(b *testing.B) {
			var customTime, plainTime time.Duration
			timed := func(total *time.Duration, dir, bin string, args []string) {
				if fresh {
					require.NoError(b, os.Remove(bin))
				}
				start := time.Now()
				mustRun(b, dir, env, args...)
				*total += time.Since(start)
			}
			for b.Loop() {
				timed(&customTime, custom, customBin, customBuild)
				timed(&plainTime, plain, plainBin, plainBuild)
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
			b.ReportMetric(ms(customTime), "kvgen-build-ms/op")
			b.ReportMetric(ms(plainTime), "go-build-ms/op")
			b.ReportMetric(float64(customTime)/float64(plainTime), "ratio")
		})
	}

	// The first build for a target: with build caches of their own, empty,
	// kvgen build -target darwin/arm64 against go build with GOOS and
	// GOARCH set, each compiling everything for that target once.
	b.Run("first-for-target", func(b *testing.B) {
		const goos, goarch = "darwin", "arm64"
		var customTime, plainTime time.Duration
		timed := func(total *time.Duration, dir string, env []string, args []string) {
			cache := b.TempDir()
			start := time.Now()
			mustRun(b, dir, append(env, "GOCACHE="+cache), args...)
			*total += time.Since(start)
		}
		customTarget := append(slices.Clone(customBuild[:len(customBuild)-1]), "-target", goos+"/"+goarch, customBuild[len(customBuild)-1])
		for b.Loop() {
			timed(&customTime, custom, env, customTarget)
			timed(&plainTime, plain, append(env, "GOOS="+goos, "GOARCH="+goarch), plainBuild)
		}
		ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) / float64(b.N) }
		b.ReportMetric(ms(customTime), "kvgen-build-ms/op")
		b.ReportMetric(ms(plainTime), "go-build-ms/op")
		b.ReportMetric(float64(customTime)/float64(plainTime), "ratio")
	})
}

// copyModule copies the module's files (tracked, and untracked but not
// ignored) into a temporary directory, which a benchmark may change freely.
func copyModule(b *testing.B, root string) string {
	b.Helper()
	res := kvgentest.Run(b, root, nil, time.Minute, "git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	require.Equal(b, 0, res.Code, "git ls-files:\n%s", res.Stderr)
	dst := b.TempDir()
	for name := range bytes.SplitSeq([]byte(res.Stdout), []byte{0}) {
		if len(name) == 0 {
			continue
		}
		rel := filepath.FromSlash(string(name))
		data, err := os.ReadFile(filepath.Join(root, rel))
		if os.IsNotExist(err) {
			continue // deleted in the working tree, not yet in the index
		}
		require.NoError(b, err)
		require.NoError(b, os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755))
		require.NoError(b, os.WriteFile(filepath.Join(dst, rel), data, 0o644))
	}
	return dst
}

func mustRun(b *testing.B, dir string, env []string, args ...string) {
	b.Helper()
	res := kvgentest.Run(b, dir, env, kvgentest.BuildTimeout, args[0], args[1:]...)
	require.Equal(b, 0, res.Code, "%q:\n%s", args, res.Stderr)
}

func listConnectorNames(b *testing.B, bin string) []string {
	b.Helper()
	var names []string
	for _, c := range listConnectors(b, bin) {
		names = append(names, c["name"].(string))
	}
	return names
}
