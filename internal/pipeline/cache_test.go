package pipeline_test

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
	"github.com/kvgen/kvgen/internal/pipeline"
)

// TestCacheFollowsEdits edits a connector between runs that share a check
// cache and expects, every time, what a run without the cache says: the
// cache is keyed by the packages' content, so no edit can be missed.
func TestCacheFollowsEdits(t *testing.T) {
	dir := kvgentest.Module(t, "example.com/kvedit", nil)
	write := func(name, content string) {
		t.Helper()
		kvgentest.WriteFiles(t, dir, map[string]string{name: content})
	}
	write("connectors.yaml", `version: 1
package: reg
output: reg/connectors_gen.go
connectors:
  - name: edited
    import: example.com/kvedit/conn
    constructor: New
`)
	t.Chdir(dir)

	// store.Conn is the connector's type, declared in another package:
	// its method set reaches the check only through export data.
	const storeOK = `package store

import (
	"context"

	"github.com/kvgen/kvgen/registry/kv"
)

type Conn struct{}

func (*Conn) Close() error { return nil }
func (*Conn) MatchedTokens(context.Context, *kv.Request, int) (int, error) { return 0, nil }
func (*Conn) AfterAlloc(context.Context, *kv.Request, int) error { return nil }
func (*Conn) RequestFinished(context.Context, *kv.Request) error { return nil }
func (*Conn) SaveLayer(context.Context, *kv.Request, string, int, []byte) error { return nil }
func (*Conn) LoadLayer(context.Context, *kv.Request, string, int) ([]byte, error) { return nil, nil }
func (*Conn) WaitForSave(context.Context) error { return nil }
func (*Conn) Finished(context.Context, []string) ([]string, []string, error) { return nil, nil, nil }
`
	const connHeader = `package conn

import (
	"context"

	"example.com/kvedit/store"
	"github.com/kvgen/kvgen/registry/kv"
)

var _ = store.Conn{}
`
	steps := []struct {
		name       string
		conn       string // the constructor's declaration
		store      string // package store, when it changes
		wantErr    string // "" for a run that passes
		wantAdapt  bool
		wantDeclAt int
	}{
		{name: "interface result",
			conn:  "func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) { return &store.Conn{}, nil }",
			store: storeOK, wantDeclAt: 11},
		{name: "signature change",
			conn:    "func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, string) { return nil, \"\" }",
			wantErr: "result 2 is string; want error"},
		{name: "concrete result",
			conn:      "\nfunc New(ctx context.Context, cfg kv.Config, role kv.Role) (*store.Conn, error) { return &store.Conn{}, nil }",
			wantAdapt: true, wantDeclAt: 12},
		{name: "role interface change in another package",
			conn:    "\nfunc New(ctx context.Context, cfg kv.Config, role kv.Role) (*store.Conn, error) { return &store.Conn{}, nil }",
			store:   strings.Replace(storeOK, "func (*Conn) LoadLayer", "func (*Conn) loadLayer", 1),
			wantErr: "does not implement kv.Worker (missing method LoadLayer)"},
		{name: "role interface restored",
			conn:  "\nfunc New(ctx context.Context, cfg kv.Config, role kv.Role) (*store.Conn, error) { return &store.Conn{}, nil }",
			store: storeOK, wantAdapt: true, wantDeclAt: 12},
		{name: "constructor renamed",
			conn:    "func Newer(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) { return nil, nil }",
			wantErr: `package "example.com/kvedit/conn" has no function "New"; did you mean "Newer"?`},
		{name: "renamed back",
			conn:       "func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) { return &store.Conn{}, nil }",
			wantDeclAt: 11},
	}
	cache := t.TempDir()
	for _, step := range steps {
		if step.store != "" {
			write("store/store.go", step.store)
		}
		write("conn/conn.go", connHeader+step.conn+"\n")
		for _, run := range []string{"first", "second"} {
			res, err := generateCached(pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml"}, cache, "edits")
			if step.wantErr != "" {
				require.Error(t, err, "%s, %s run", step.name, run)
				assert.Contains(t, err.Error(), step.wantErr, "%s, %s run", step.name, run)
				continue
			}
			require.NoError(t, err, "%s, %s run", step.name, run)
			require.Len(t, res.Entries, 1)
			e := res.Entries[0]
			assert.Equal(t, step.wantAdapt, e.Adapt, "%s, %s run", step.name, run)
			assert.Equal(t, step.wantDeclAt, e.Decl.Line, "%s, %s run", step.name, run)
			assert.Equal(t, filepath.Join("conn", "conn.go"), e.Decl.Filename, "%s, %s run", step.name, run)

			uncached, err := pipeline.Generate(context.Background(), pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml"})
			require.NoError(t, err)
			assert.Equal(t, string(uncached.Content), string(res.Content), "%s, %s run", step.name, run)
			_, err = res.Write()
			require.NoError(t, err)
		}
	}
	files, err := filepath.Glob(filepath.Join(cache, "check", "*.json"))
	require.NoError(t, err)
	assert.Len(t, files, 1, "one cache file per manifest")
}

// TestCacheUpToDateFile: with a warm cache, an unchanged tree's registry
// file is read back as the result, and a hand edit to it is still seen.
func TestCacheUpToDateFile(t *testing.T) {
	inCase(t, "basic")
	opts, cache := pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml"}, t.TempDir()
	res, err := generateCached(opts, cache, "test")
	require.NoError(t, err)
	_, err = res.Write()
	require.NoError(t, err)

	again, err := generateCached(opts, cache, "test")
	require.NoError(t, err)
	diff, err := again.Stale()
	require.NoError(t, err)
	assert.Nil(t, diff)
	assert.Equal(t, string(res.Content), string(again.Content))

	edited := append([]byte(nil), res.Content...)
	edited = append(edited, "// a hand edit\n"...)
	require.NoError(t, os.WriteFile(res.Path, edited, 0o644))
	third, err := generateCached(opts, cache, "test")
	require.NoError(t, err)
	assert.Equal(t, string(res.Content), string(third.Content), "the rendered file, not the edited one")
	diff, err = third.Stale()
	require.NoError(t, err)
	require.NotNil(t, diff)
	assert.False(t, diff.Missing)
	assert.Equal(t, strings.Count(string(res.Content), "\n")+1, diff.Line, "the first line that differs: the edit's")
	assert.Contains(t, string(diff.Diff), "a hand edit")

	require.NoError(t, os.Remove(res.Path))
	diff, err = third.Stale()
	require.NoError(t, err)
	require.NotNil(t, diff, "a missing file is stale")
	assert.True(t, diff.Missing)
	assert.Equal(t, 1, diff.Line)
	assert.Contains(t, string(diff.Diff), res.Path+" (missing)")
}

// TestCacheFollowsTheContract changes the contract a factory: names, and
// not the constructor, between runs that share a cache: the
// constructor is checked against the new contract.
func TestCacheFollowsTheContract(t *testing.T) {
	inCase(t, "ok_contract_func")
	opts, cache := pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml"}, t.TempDir()
	for range 2 {
		_, err := generateCached(opts, cache, "test")
		require.NoError(t, err)
	}
	path := filepath.Join("contract", "contract.go")
	src, err := os.ReadFile(path)
	require.NoError(t, err)
	changed := strings.Replace(string(src), "cfg json.RawMessage) (http.Handler, error)", "cfg json.RawMessage, name string) (http.Handler, error)", 1)
	require.NotEqual(t, string(src), changed)
	require.NoError(t, os.WriteFile(path, []byte(changed), 0o644))
	_, err = generateCached(opts, cache, "test")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `marked.New (declared at marked/marked.go:12) has 2 parameters; want 3`)
}

// TestCacheBelongsToOneGenerator: the cache is used only with an identity
// for the generator, and what one generator found is not used by another.
func TestCacheBelongsToOneGenerator(t *testing.T) {
	inCase(t, "basic")
	cache := t.TempDir()
	entries := func(identity string) []string {
		t.Helper()
		_, err := generateCached(pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml"}, cache, identity)
		require.NoError(t, err)
		files, err := filepath.Glob(filepath.Join(cache, "check", "*.json"))
		require.NoError(t, err)
		if len(files) == 0 {
			return nil
		}
		require.Len(t, files, 1)
		data, err := os.ReadFile(files[0])
		require.NoError(t, err)
		var file struct{ Entries map[string]json.RawMessage }
		require.NoError(t, json.Unmarshal(data, &file))
		return slices.Sorted(maps.Keys(file.Entries))
	}
	assert.Empty(t, entries(""), "no identity, no cache")
	a := entries("kvgen v0.1.0")
	require.NotEmpty(t, a)
	assert.Equal(t, a, entries("kvgen v0.1.0"), "the same generator reuses its checks")
	b := entries("kvgen v0.2.0")
	require.NotEmpty(t, b)
	for _, k := range b {
		assert.NotContains(t, a, k, "another generator checks afresh")
	}
}

// generateCached runs Generate with the cache that dir holds for the
// generator identity names, as kvgen runs it: opened for the run, and
// saved after it, whether it failed or not.
func generateCached(opts pipeline.Options, dir, identity string) (*pipeline.Result, error) {
	opts.Cache = pipeline.OpenCache(dir, identity)
	res, err := pipeline.Generate(context.Background(), opts)
	opts.Cache.Save()
	return res, err
}

// Generate writes nothing to the cache: what it found is on disk
// only once the caller saves it.
func TestCacheIsWrittenOnlyBySave(t *testing.T) {
	inCase(t, "basic")
	cacheDir := t.TempDir()
	cache := pipeline.OpenCache(cacheDir, "test")
	_, err := pipeline.Generate(context.Background(), pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml", Cache: cache})
	require.NoError(t, err)
	ents, err := os.ReadDir(cacheDir)
	require.NoError(t, err)
	assert.Empty(t, ents, "Generate wrote to the cache directory")
	cache.Save()
	files, err := filepath.Glob(filepath.Join(cacheDir, "check", "*.json"))
	require.NoError(t, err)
	assert.Len(t, files, 1, "Save writes the manifest's cache file")
}

// inCase makes the golden case name a module of its own, as TestGolden
// does, and runs the rest of the test in it.
func inCase(t *testing.T, name string) {
	t.Helper()
	t.Chdir(caseModule(t, filepath.Join(kvgentest.Root(t), "internal", "pipeline", "testdata", name)))
}
