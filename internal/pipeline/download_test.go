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

// A connector whose module's dependency cannot be downloaded does not
// build; the error says what the go command said, not only that the
// package has no export data.
func TestPackageThatCannotBuildSaysWhy(t *testing.T) {
	dir := guardModule(t, "reg_gen.go")
	files := map[string]string{
		"conn/go.mod": "module example.com/conn\n\ngo 1.26.0\n\nrequire example.com/missing v1.0.0\n",
		"conn/conn.go": `package conn

import (
	"context"

	_ "example.com/missing"

	"github.com/kvgen/kvgen/registry/kv"
)

func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return nil, nil
}
`,
		"connectors.yaml": "version: 1\npackage: kvcase\noutput: reg_gen.go\nconnectors:\n  - name: conn\n    import: example.com/conn\n    constructor: New\n",
	}
	kvgentest.WriteFiles(t, dir, files)
	goCmd(t, dir, "mod", "edit", "-require=example.com/conn@v0.0.0-00010101000000-000000000000", "-replace=example.com/conn=./conn")
	// With go.sum naming the dependency, the go command tries to
	// download it; GOPROXY=off makes that fail the same way on any
	// machine.
	sum, err := os.ReadFile("go.sum")
	require.NoError(t, err)
	sum = append(sum, "example.com/missing v1.0.0 h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\nexample.com/missing v1.0.0/go.mod h1:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=\n"...)
	require.NoError(t, os.WriteFile("go.sum", sum, 0o644))
	t.Setenv("GOPROXY", "off")

	_, err = pipeline.Generate(context.Background(), pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `connectors.yaml:6:13: connector "conn": package "example.com/conn": package example.com/conn does not build: `)
	assert.Contains(t, err.Error(), "example.com/missing: conn/conn.go:6:2: module lookup disabled by GOPROXY=off")
	assert.NoFileExists(t, "reg_gen.go")
}

// A package in a module nested in the main module's tree, which go.mod
// does not require, is no package the go command can get: it would say
// to go get it, which asks a module proxy for a module that is only here.
// The error says to replace it by its directory.
func TestPackageInANestedModuleSaysToReplaceIt(t *testing.T) {
	dir := guardModule(t, "reg_gen.go")
	kvgentest.WriteFiles(t, dir, map[string]string{
		"plugins/nestkv/go.mod":    "module example.com/kvcase/plugins/nestkv\n\ngo 1.26.0\n",
		"plugins/nestkv/nestkv.go": "package nestkv\n",
		"connectors.yaml":          "version: 1\npackage: kvcase\noutput: reg_gen.go\nconnectors:\n  - name: nest\n    import: example.com/kvcase/plugins/nestkv\n    constructor: New\n",
	})
	t.Setenv("GOPROXY", "off")
	_, err := pipeline.Generate(context.Background(), pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml"})
	require.Error(t, err)
	assert.Equal(t, `connectors.yaml:6:13: connector "nest": package "example.com/kvcase/plugins/nestkv": directory plugins/nestkv is in a module of its own (plugins/nestkv/go.mod), which go.mod does not require; give the entry replace: with that module's directory, relative to the manifest`, err.Error())
	assert.NoFileExists(t, "reg_gen.go")
}
