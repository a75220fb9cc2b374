package deploy

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
	"github.com/kvgen/kvgen/internal/pipeline"
)

// TestBuildWarm: a second build of an unchanged tree whose connector and
// kvgen's runtime are module versions go.sum pins takes the warm path,
// says what the first said, and writes the same binary; another selection
// of entries loads again.
func TestBuildWarm(t *testing.T) {
	if testing.Short() {
		t.Skip("fills a module cache of its own and builds three binaries")
	}
	p := kvgentest.NewPinned(t)
	p.Add(t, "example.com/warmconn", "v0.1.0", map[string]string{
		"go.mod":      "module example.com/warmconn\n\ngo 1.26.0\n\nrequire " + kvgentest.Path + " " + kvgentest.PinnedVersion + "\n",
		"warmconn.go": "package warmconn\n\nimport (\n\t\"context\"\n\n\t\"github.com/kvgen/kvgen/registry/kv\"\n)\n\nfunc New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {\n\treturn nil, nil\n}\n",
	})
	dir := t.TempDir()
	p.Host(t, dir, "example.com/warmhost", map[string]string{
		"deploy.yaml":           "version: 1\nconnectors:\n  - name: warm\n    import: example.com/warmconn\n    constructor: New\n",
		"srv/main.go":           "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(Registry.Names()) }\n",
		"srv/connectors_gen.go": committed,
	}, "example.com/warmconn@v0.1.0")
	cacheDir := t.TempDir()
	timing := regexp.MustCompile(`done in .*`)

	// build runs one target's build as Build does, and returns the
	// binary, the progress lines without their timings, and whether the
	// registry was loaded and checked (a warm hit has no contract).
	build := func(only []string, bin string) ([]byte, []string, bool) {
		t.Helper()
		var lines []string
		opts := Options{
			WorkDir: dir, Env: p.Env, Manifest: "deploy.yaml", Package: "./srv", Binary: bin, Only: only,
			Cache:    pipeline.OpenCache(cacheDir, "kvgen test"),
			Progress: func(s string) { lines = append(lines, timing.ReplaceAllString(s, "done")) },
		}
		b := &builder{opts: opts, gen: opts.genOptions(), output: bin, env0: opts.Env}
		require.NoError(t, b.run(context.Background()))
		opts.Cache.Save()
		data, err := os.ReadFile(filepath.Join(dir, bin))
		require.NoError(t, err)
		return data, lines, b.regs[0].Contract != nil
	}
	slow, slowLines, loaded := build(nil, "bin/slow")
	require.True(t, loaded, "the first build loads")
	warm, warmLines, loaded := build(nil, "bin/warm")
	assert.False(t, loaded, "a second build of an unchanged tree loads nothing")
	assert.Equal(t, slowLines, warmLines)
	assert.True(t, bytes.Equal(slow, warm), "the binary built on a warm hit is the one built without")
	data, err := os.ReadFile(filepath.Join(dir, "srv", "connectors_gen.go"))
	require.NoError(t, err)
	assert.Equal(t, committed, string(data), "the tree is left as it was")

	_, _, loaded = build([]string{"warm"}, "bin/only")
	assert.True(t, loaded, "another selection of entries loads")
}
