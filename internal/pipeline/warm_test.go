package pipeline_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
	"github.com/kvgen/kvgen/internal/pipeline"
)

const warmConnector = `// Package warmconn is a connector.
package warmconn

import (
	"context"

	"github.com/kvgen/kvgen/registry/kv"
)

// New creates it.
func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return nil, nil
}
`

const warmManifest = `version: 1
output: reg/connectors_gen.go
connectors:
  - name: warm
    import: example.com/warmconn
    constructor: New
`

// reachConnector is a connector of a module version that returns a type
// of the host module's, example.com/warmhost/hosttypes.
const reachConnector = `package warmreach

import (
	"context"

	"example.com/warmhost/hosttypes"
	"github.com/kvgen/kvgen/registry/kv"
)

// New creates it.
func New(ctx context.Context, cfg kv.Config, role kv.Role) (hosttypes.Conn, error) {
	return nil, nil
}
`

// warmHost makes a host module in a temporary directory whose one
// connector, example.com/warmconn, and kvgen's runtime are module
// versions served by a proxy, and returns the module's directory and the
// environment of its go commands.
func warmHost(t *testing.T, files map[string]string) (string, []string) {
	t.Helper()
	if testing.Short() {
		t.Skip("fills a module cache of its own")
	}
	p := kvgentest.NewPinned(t)
	p.Add(t, "example.com/warmconn", "v0.1.0", map[string]string{
		"go.mod":      "module example.com/warmconn\n\ngo 1.26.0\n\nrequire " + kvgentest.Path + " " + kvgentest.PinnedVersion + "\n",
		"warmconn.go": warmConnector,
	})
	dir := t.TempDir()
	p.Host(t, dir, "example.com/warmhost", files, "example.com/warmconn@v0.1.0")
	return dir, p.Env
}

// warmRunner runs Generate as kvgen generate does, with the cache in a
// directory of the test's: opened for the run, the file written, the
// cache saved. With Options.ForOverlay it runs it as kvgen build does:
// the file goes into an overlay, whose go build flags it keeps.
type warmRunner struct {
	t     *testing.T
	opts  pipeline.Options
	cache string
	flags []string // the last overlay's
}

// run generates and writes the file, or its overlay, and reports whether
// the run loaded packages.
func (w *warmRunner) run() (*pipeline.Result, bool) {
	w.t.Helper()
	opts := w.opts
	opts.Cache = pipeline.OpenCache(w.cache, "kvgen test")
	before := pipeline.Loads()
	res, err := pipeline.Generate(context.Background(), opts)
	opts.Cache.Save()
	require.NoError(w.t, err)
	if opts.ForOverlay {
		w.flags, err = pipeline.Overlay(w.t.TempDir(), res)
	} else {
		_, err = res.Write()
	}
	require.NoError(w.t, err)
	return res, pipeline.Loads() != before
}

// appender returns a change that appends s to the file name in dir.
func appender(t *testing.T, dir string) func(name, s string) func() {
	return func(name, s string) func() {
		return func() {
			f, err := os.OpenFile(filepath.Join(dir, name), os.O_APPEND|os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteString(s)
			require.NoError(t, err)
			require.NoError(t, f.Close())
		}
	}
}

// inputChange changes one input of a run, and says whether the next run
// must load again.
type inputChange struct {
	name   string
	change func()
	loads  bool
}

// eachChange makes each change in turn: the run after it loads as the
// change says, and the run after that, nothing having changed, does not.
func (w *warmRunner) eachChange(changes []inputChange) {
	w.t.Helper()
	for _, c := range changes {
		c.change()
		_, loaded := w.run()
		assert.Equal(w.t, c.loads, loaded, "after changing %s", c.name)
		_, loaded = w.run()
		assert.False(w.t, loaded, "after changing %s, the second run", c.name)
	}
}

// TestWarmFollowsEveryInput: a run that nothing can have changed loads no
// package, and changing any input the key holds loads them again, once.
func TestWarmFollowsEveryInput(t *testing.T) {
	dir, env := warmHost(t, map[string]string{
		"connectors.yaml": warmManifest,
		"reg/reg.go":      "package reg\n\nvar Version = 1\n",
	})
	// -trimpath, as kvgen build loads: the standard library for the
	// GOOS step below is the one the suite compiles first for Windows.
	w := &warmRunner{t: t, opts: pipeline.Options{WorkDir: dir, Env: env, Manifest: "connectors.yaml", Warm: true, TrimPath: true}, cache: t.TempDir()}
	first, loaded := w.run()
	require.True(t, loaded, "the first run loads")
	warm, loaded := w.run()
	require.False(t, loaded, "an unchanged tree is not loaded again")
	assert.Equal(t, string(first.Content), string(warm.Content))
	assert.Equal(t, first.Path, warm.Path)
	assert.Equal(t, first.Package, warm.Package)
	files, err := filepath.Glob(filepath.Join(w.cache, "check", "*.json"))
	require.NoError(t, err)
	require.Len(t, files, 1)
	var file struct{ Entries map[string]json.RawMessage }
	data, err := os.ReadFile(files[0])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &file))
	assert.Len(t, file.Entries, 1, "a warm run keeps the checks it did not use")

	appendTo := appender(t, dir)
	goFlags := strings.TrimSpace(os.Getenv("GOFLAGS") + " -modcacherw")
	w.eachChange([]inputChange{
		{"a manifest byte", appendTo("connectors.yaml", "# more\n"), true},
		{"go.mod", appendTo("go.mod", "// more\n"), true},
		{"go.sum", appendTo("go.sum", "\n"), true},
		{"a name the output package declares", appendTo("reg/reg.go", "\nvar Extra = 2\n"), true},
		{"the output package's code, not its names", appendTo("reg/reg.go", "\n// Extra is more.\n"), false},
		{"GOFLAGS", func() { w.opts.Env = append(slices.Clip(w.opts.Env), "GOFLAGS="+goFlags+" -p=1") }, true},
		{"build tags", func() { w.opts.Tags = []string{"warmtag"} }, true},
		{"GOOS", func() { w.opts.Env = append(slices.Clip(w.opts.Env), "GOOS=windows") }, true},
		{"GODEBUG", func() { w.opts.Env = append(slices.Clip(w.opts.Env), "GODEBUG=gotypesalias=1") }, true},
		{"the generated file", appendTo("reg/connectors_gen.go", "// edited\n"), true},
		{"Options.Output", func() {
			require.NoError(t, os.Remove(filepath.Join(dir, "reg", "connectors_gen.go")))
			w.opts.Output = filepath.Join("reg", "registry_gen.go")
		}, true},
	})

	// A cache file that is not one is ignored.
	files, err = filepath.Glob(filepath.Join(w.cache, "check", "*.json"))
	require.NoError(t, err)
	for _, f := range files {
		require.NoError(t, os.WriteFile(f, []byte("{\"warm\": 7"), 0o644))
	}
	_, loaded = w.run()
	assert.True(t, loaded, "with a corrupt cache file")
	_, loaded = w.run()
	assert.False(t, loaded, "with the cache file written again")

	// A removed file is written again, by the ordinary path.
	require.NoError(t, os.Remove(filepath.Join(dir, "reg", "registry_gen.go")))
	_, loaded = w.run()
	assert.True(t, loaded, "a missing file is generated")
	assert.FileExists(t, filepath.Join(dir, "reg", "registry_gen.go"))
}

// TestWarmNeedsWarm: without Options.Warm, or without a cache, every run
// loads.
func TestWarmNeedsWarm(t *testing.T) {
	dir, env := warmHost(t, map[string]string{"connectors.yaml": warmManifest})
	for _, w := range []*warmRunner{
		{t: t, opts: pipeline.Options{WorkDir: dir, Env: env, Manifest: "connectors.yaml"}, cache: t.TempDir()},
		{t: t, opts: pipeline.Options{WorkDir: dir, Env: env, Manifest: "connectors.yaml", Warm: true}, cache: ""},
	} {
		for range 2 {
			_, loaded := w.run()
			assert.True(t, loaded)
		}
	}
}

// TestWarmOnlyPinned: an entry whose package is in the main module, or in
// a module replaced by a directory, or a kvgen replaced by one, is loaded
// on every run; and, since go.mod and the manifest say so before the load,
// without listing every dependency for a warm record. A pinned entry that
// imports a package of the main module is known only from that listing.
func TestWarmOnlyPinned(t *testing.T) {
	const mainManifest = warmManifest + `  - name: local
    import: example.com/warmhost/local
    constructor: New
`
	mainDir, env := warmHost(t, map[string]string{
		"connectors.yaml": mainManifest,
		"local/local.go":  strings.Replace(warmConnector, "package warmconn", "package local", 1),
	})

	replacedDir, replacedEnv := warmHost(t, map[string]string{"connectors.yaml": warmManifest})
	kvgentest.WriteFiles(t, filepath.Dir(replacedDir), map[string]string{
		"warmconn/go.mod":      "module example.com/warmconn\n\ngo 1.26.0\n\nrequire " + kvgentest.Path + " " + kvgentest.PinnedVersion + "\n",
		"warmconn/warmconn.go": warmConnector,
	})
	replaced := filepath.Join(filepath.Dir(replacedDir), "warmconn")
	gomod, err := os.ReadFile(filepath.Join(replacedDir, "go.mod"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(replacedDir, "go.mod"), append(gomod, "\nreplace example.com/warmconn => "+replaced+"\n"...), 0o644))

	// A pinned connector whose package imports one of the main module's
	// packages sees the main module's files, which the key does not hold.
	reach := kvgentest.NewPinned(t)
	reach.Add(t, "example.com/warmreach", "v0.1.0", map[string]string{
		"go.mod":       "module example.com/warmreach\n\ngo 1.26.0\n\nrequire " + kvgentest.Path + " " + kvgentest.PinnedVersion + "\n",
		"warmreach.go": reachConnector,
	})
	reachDir := t.TempDir()
	reach.Host(t, reachDir, "example.com/warmhost", map[string]string{
		"connectors.yaml":        strings.Replace(warmManifest, "example.com/warmconn", "example.com/warmreach", 1),
		"hosttypes/hosttypes.go": "package hosttypes\n\nimport \"github.com/kvgen/kvgen/registry/kv\"\n\n// Conn is what the connector returns.\ntype Conn = kv.Connector\n",
	}, "example.com/warmreach@v0.1.0")

	kvgenDir := kvgentest.Module(t, "example.com/warmdev", map[string]string{
		"connectors.yaml": strings.Replace(warmManifest, "example.com/warmconn", "example.com/warmdev/conn", 1),
		"conn/conn.go":    strings.Replace(warmConnector, "package warmconn", "package conn", 1),
	})

	for _, c := range []struct {
		name     string
		dir      string
		env      []string
		listDeps bool
	}{
		{"an entry in the main module", mainDir, env, false},
		{"an entry in a module replaced by a directory", replacedDir, replacedEnv, false},
		{"a pinned entry that imports a package of the main module", reachDir, reach.Env, true},
		{"kvgen replaced by a directory", kvgenDir, os.Environ(), false},
	} {
		for _, overlay := range []bool{false, true} {
			w := &warmRunner{t: t, opts: pipeline.Options{WorkDir: c.dir, Env: c.env, Manifest: "connectors.yaml", Warm: true, ForOverlay: overlay}, cache: t.TempDir()}
			for i := range 3 {
				deps := pipeline.DepsRuns()
				_, loaded := w.run()
				assert.True(t, loaded, "%s, for an overlay %v: run %d", c.name, overlay, i+1)
				assert.Equal(t, c.listDeps, pipeline.DepsRuns() != deps, "%s, for an overlay %v: run %d listed every dependency", c.name, overlay, i+1)
			}
		}
	}
}

// buildHost is a host module, as warmHost makes it, with a main package
// in srv whose committed registry, srv/connectors_gen.go, lists nothing,
// and a deployment manifest, deploy.yaml, that links the connector.
func buildHost(t *testing.T) (string, []string) {
	t.Helper()
	return warmHost(t, map[string]string{
		"deploy.yaml":           "version: 1\nconnectors:\n  - name: warm\n    import: example.com/warmconn\n    constructor: New\n",
		"srv/main.go":           "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(Registry.Names()) }\n",
		"srv/connectors_gen.go": "// Code generated by kvgen from connectors.yaml. DO NOT EDIT.\n\npackage main\n\nimport \"github.com/kvgen/kvgen/registry/kv\"\n\nvar Registry = kv.NewRegistry(nil)\n",
	})
}

// TestWarmOverlayFollowsEveryInput: a run for an overlay, as kvgen build
// makes, on an unchanged tree loads no package, whatever the file on disk
// holds, and builds the same binary; changing any input the key holds
// loads them again, once.
func TestWarmOverlayFollowsEveryInput(t *testing.T) {
	dir, env := buildHost(t)
	w := &warmRunner{t: t, cache: t.TempDir(), opts: pipeline.Options{
		WorkDir: dir, Env: env, Manifest: "deploy.yaml", Output: filepath.Join("srv", "connectors_gen.go"),
		Dir: ".", TrimPath: true, Warm: true, ForOverlay: true,
	}}
	build := func(bin string) []byte {
		t.Helper()
		args := append(append([]string{"build", "-o", bin}, w.flags...), "./srv")
		res := kvgentest.Run(t, dir, w.opts.Env, kvgentest.BuildTimeout, "go", args...)
		require.Equal(t, 0, res.Code, "go build:\n%s", res.Stderr)
		data, err := os.ReadFile(bin)
		require.NoError(t, err)
		return data
	}
	bins := t.TempDir()
	first, loaded := w.run()
	require.True(t, loaded, "the first run loads")
	slow := build(filepath.Join(bins, "slow"))
	warm, loaded := w.run()
	require.False(t, loaded, "an unchanged tree is not loaded again")
	assert.Equal(t, string(first.Content), string(warm.Content))
	assert.Empty(t, warm.Warnings)
	assert.Empty(t, warm.ModuleChanges())
	assert.True(t, bytes.Equal(slow, build(filepath.Join(bins, "warm"))), "the binary built on a warm hit is the one built without")
	committed, err := os.ReadFile(filepath.Join(dir, "srv", "connectors_gen.go"))
	require.NoError(t, err)
	assert.NotContains(t, string(committed), "warmconn", "the file on disk is left as it was")

	appendTo := appender(t, dir)
	w.eachChange([]inputChange{
		{"the file on disk", appendTo("srv/connectors_gen.go", "// edited\n"), false},
		{"the main package's code, not its names", appendTo("srv/main.go", "\n// More.\n"), false},
		{"a name the main package declares", appendTo("srv/main.go", "\nvar Extra = 2\n"), true},
		{"a manifest byte", appendTo("deploy.yaml", "# more\n"), true},
		{"go.mod", appendTo("go.mod", "// more\n"), true},
		{"go.sum", appendTo("go.sum", "\n"), true},
		{"the entries kept (-for)", func() { w.opts.Only = []string{"warm"} }, true},
		{"build tags", func() { w.opts.Tags = []string{"warmtag"} }, true},
		{"the target's GOOS", func() { w.opts.Env = append(slices.Clip(w.opts.Env), "GOOS=windows") }, true},
	})

	// Each target keeps a record of its own: after the build for
	// windows, one for the host's platform, as before it, loads nothing.
	for _, goos := range []string{runtime.GOOS, "windows", runtime.GOOS} {
		w.opts.Env = append(slices.Clip(w.opts.Env), "GOOS="+goos)
		_, loaded := w.run()
		assert.False(t, loaded, "again for %s", goos)
	}
}

// A module whose content does not match go.sum is what the go command
// says it is, a checksum mismatch, and not a problem of kvgen's registry.
func TestChecksumMismatchIsNamed(t *testing.T) {
	dir, env := warmHost(t, map[string]string{"connectors.yaml": warmManifest})
	sum, err := os.ReadFile(filepath.Join(dir, "go.sum"))
	require.NoError(t, err)
	var forged []string
	for line := range strings.Lines(string(sum)) {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "example.com/warmconn" && !strings.HasSuffix(f[1], "/go.mod") {
			line = f[0] + " " + f[1] + " h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"
		}
		forged = append(forged, line)
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.sum"), []byte(strings.Join(forged, "")), 0o644))
	_, err = pipeline.Generate(context.Background(), pipeline.Options{WorkDir: dir, Env: env, Manifest: "connectors.yaml"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "example.com/warmconn")
	assert.Contains(t, err.Error(), "checksum mismatch")
	assert.NotContains(t, err.Error(), "without error now")
}

// The GOOS a go env file sets chooses the output package's files, as it
// does the go command's, even when GOFLAGS is in the environment, which
// spares kvgen the go env run that would otherwise tell it.
func TestGoEnvFileChoosesTheOutputPackagesFiles(t *testing.T) {
	dir := kvgentest.Module(t, "example.com/envfile", map[string]string{
		"connectors.yaml":    "version: 1\noutput: reg/connectors_gen.go\nconnectors: []\n",
		"reg/reg_windows.go": "package reg\n\n// Registry is another.\nvar Registry = 1\n",
	})
	goenv := filepath.Join(t.TempDir(), "env")
	require.NoError(t, os.WriteFile(goenv, []byte("GOOS=windows\n"), 0o644))
	// GOFLAGS as kvgentest.Main set it: with -trimpath, as the tests'
	// other windows builds, which would otherwise compile the standard
	// library for windows once more, for this test alone.
	env := append(os.Environ(), "GOENV="+goenv, "GOFLAGS="+os.Getenv("GOFLAGS"))
	_, err := pipeline.Generate(context.Background(), pipeline.Options{WorkDir: dir, Env: env, Manifest: "connectors.yaml",
		Warm: true, Cache: pipeline.OpenCache(t.TempDir(), "kvgen test")})
	require.ErrorContains(t, err, "already declares Registry")
}
