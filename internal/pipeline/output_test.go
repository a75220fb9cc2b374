package pipeline

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/manifest"
)

// The output package's files are selected for the GOOS, GOARCH and build
// tags of the environment gen is given, not of the process it runs in.
func TestOutputPackageFollowsTheGivenEnvironment(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"srv_linux.go":   "package onlinux\n",
		"srv_windows.go": "package onwindows\n",
		"srv_tagged.go":  "//go:build edge\n\npackage tagged\n\nfunc Registry() {}\n",
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644))
	}
	m, err := manifest.Parse("connectors.yaml", []byte("version: 1\nconnectors: []\n"))
	require.NoError(t, err)
	out := filepath.Join(dir, "connectors_gen.go")

	for goos, want := range map[string]string{"linux": "onlinux", "windows": "onwindows"} {
		o, err := readOutputPackage(m, "srv/connectors_gen.go", out, buildContext([]string{"GOOS=" + goos, "GOARCH=amd64"}, nil))
		require.NoError(t, err, goos)
		assert.Equal(t, want, o.name, goos)
	}
	// The last value of a key counts, as for os/exec.
	o, err := readOutputPackage(m, "srv/connectors_gen.go", out, buildContext([]string{"GOOS=linux", "GOOS=windows"}, nil))
	require.NoError(t, err)
	assert.Equal(t, "onwindows", o.name)

	_, err = readOutputPackage(m, "srv/connectors_gen.go", out, buildContext([]string{"GOOS=linux"}, []string{"edge"}))
	assert.EqualError(t, err, `"srv/srv_tagged.go" already declares Registry, which the generated file declares; rename it`)
	// GOFLAGS's -tags select files as -tags does, unless -tags is given,
	// which the go command's command line passes after GOFLAGS.
	_, err = readOutputPackage(m, "srv/connectors_gen.go", out, buildContext([]string{"GOOS=linux", "GOFLAGS=-mod=readonly -tags=other,edge"}, nil))
	assert.EqualError(t, err, `"srv/srv_tagged.go" already declares Registry, which the generated file declares; rename it`)
	o, err = readOutputPackage(m, "srv/connectors_gen.go", out, buildContext([]string{"GOOS=linux", "GOFLAGS=--tags=edge"}, []string{"other"}))
	require.NoError(t, err)
	assert.Equal(t, "onlinux", o.name)
	// What go env said of GOOS counts where the environment says nothing:
	// a go env file may set it.
	asked := make([]string, len(warmGoEnv))
	asked[slices.Index(warmGoEnv, "GOOS")], asked[slices.Index(warmGoEnv, "GOARCH")] = "windows", "amd64"
	o, err = readOutputPackage(m, "srv/connectors_gen.go", out, Options{Env: []string{"GOARCH=amd64"}, goEnv: asked}.buildContext())
	require.NoError(t, err)
	assert.Equal(t, "onwindows", o.name)
	o, err = readOutputPackage(m, "srv/connectors_gen.go", out, Options{Env: []string{"GOOS=linux"}, goEnv: asked}.buildContext())
	require.NoError(t, err)
	assert.Equal(t, "onlinux", o.name)
}
