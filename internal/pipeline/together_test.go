package pipeline_test

import (
	"context"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
	"github.com/kvgen/kvgen/internal/pipeline"
)

// Manifests generated together list their packages in one go list run,
// and each result is what its manifest generates alone; a manifest whose
// entry has a problem loads on its own, and reports what it would alone.
func TestManifestsTogetherShareOneLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	dir := togetherModule(t)
	t.Chdir(dir)
	ctx := context.Background()
	opts := pipeline.Options{WorkDir: dir, Env: os.Environ()}
	generate := func(opts pipeline.Options, manifest string) (*pipeline.Result, error) {
		opts.Manifest = manifest
		return pipeline.Generate(ctx, opts)
	}

	alone := map[string]*pipeline.Result{}
	var aloneErr error
	for _, m := range []string{"a.yaml", "b.yaml"} {
		res, err := generate(opts, m)
		require.NoError(t, err)
		alone[m] = res
	}
	_, aloneErr = generate(opts, "bad.yaml")
	require.Error(t, aloneErr)

	manifests := []string{"a.yaml", "b.yaml", "bad.yaml"}
	shared := pipeline.Together(opts, manifests)
	before := pipeline.ListRuns()
	for _, m := range manifests[:2] {
		res, err := generate(shared, m)
		require.NoError(t, err)
		assert.Equal(t, string(alone[m].Content), string(res.Content), m)
		assert.Equal(t, alone[m].Entries[0].Module, res.Entries[0].Module)
	}
	assert.Equal(t, int64(1), pipeline.ListRuns()-before, "both manifests' packages are listed in one go list run")

	// The manifest whose package is missing loads alone, and says what it
	// says alone.
	_, err := generate(shared, "bad.yaml")
	require.Error(t, err)
	assert.Equal(t, aloneErr.Error(), err.Error())
	assert.Equal(t, int64(2), pipeline.ListRuns()-before)
}

// A run that shares the load of manifests generated together lists its
// packages again when go.mod changed after the shared load: a run before
// it may have linked modules into it. The go.mod compared is the main
// module's, as the loader package names it, whichever root the go command
// lists first (with every dependency, as the warm path lists, another
// module's package may come first).
func TestManifestsTogetherLoadAgainAfterGoModChanges(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	dir := togetherModule(t)
	t.Chdir(dir)
	ctx := context.Background()
	opts := pipeline.Options{WorkDir: dir, Env: os.Environ(), Warm: true, Cache: pipeline.OpenCache(t.TempDir(), "kvgen-test")}
	shared := pipeline.Together(opts, []string{"a.yaml", "b.yaml"})
	before, envBefore := pipeline.ListRuns(), pipeline.GoEnvRuns()
	shared.Manifest = "a.yaml"
	_, err := pipeline.Generate(ctx, shared)
	require.NoError(t, err)
	require.Equal(t, int64(1), pipeline.ListRuns()-before)

	f, err := os.OpenFile("go.mod", os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString("\n// changed by another run\n")
	require.NoError(t, err)
	require.NoError(t, f.Close())

	shared.Manifest = "b.yaml"
	_, err = pipeline.Generate(ctx, shared)
	require.NoError(t, err)
	assert.Equal(t, int64(2), pipeline.ListRuns()-before, "b.yaml lists its packages again, go.mod having changed")
	assert.Equal(t, int64(1), pipeline.GoEnvRuns()-envBefore, "one go env run answers both runs")

	// Alone, each run asks go env for itself.
	envBefore = pipeline.GoEnvRuns()
	for _, m := range []string{"a.yaml", "b.yaml"} {
		opts.Manifest = m
		_, err = pipeline.Generate(ctx, opts)
		require.NoError(t, err)
	}
	assert.Equal(t, int64(2), pipeline.GoEnvRuns()-envBefore)
}

// togetherModule is a module of two plugins of one contract, each in a
// manifest of its own (a.yaml, b.yaml), and a manifest whose plugin's
// package is missing (bad.yaml).
func togetherModule(t *testing.T) string {
	return kvgentest.Module(t, "example.com/together", map[string]string{
		"text/text.go":   "package text\n\n// Transform changes its input.\ntype Transform func(in string) string\n",
		"shout/shout.go": "package shout\n\nimport \"strings\"\n\nfunc New(in string) string { return strings.ToUpper(in) }\n",
		"quiet/quiet.go": "package quiet\n\nimport \"strings\"\n\nfunc New(in string) string { return strings.ToLower(in) }\n",
		"a.yaml":         "version: 1\nfactory: example.com/together/text.Transform\npackage: a\noutput: a/registry_gen.go\nplugins:\n  - {name: shout, import: example.com/together/shout, constructor: New}\n",
		"b.yaml":         "version: 1\nfactory: example.com/together/text.Transform\npackage: b\noutput: b/registry_gen.go\nplugins:\n  - {name: quiet, import: example.com/together/quiet, constructor: New}\n",
		"bad.yaml":       "version: 1\nfactory: example.com/together/text.Transform\npackage: c\noutput: c/registry_gen.go\nplugins:\n  - {name: gone, import: example.com/together/gone, constructor: New}\n",
		"a/doc.go":       "package a\n",
		"b/doc.go":       "package b\n",
		"c/doc.go":       "package c\n",
	})
}
