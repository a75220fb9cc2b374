package load

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"
)

// A module version GOPROXY=off kept the go command from looking up is said
// to be missing from the module cache, with the command that fetches it.
func TestNotCached(t *testing.T) {
	nc := notCached("go get: example.com/kv@v0.9.0: module lookup disabled by GOPROXY=off", "", "")
	require.NotNil(t, nc)
	assert.Equal(t, &NotCachedError{Module: "example.com/kv", Version: "v0.9.0"}, nc)
	assert.Equal(t, &NotCachedError{Module: "example.com/kv", Version: "v0.2.0"}, notCached("module lookup disabled by GOPROXY=off", "example.com/kv", "v0.2.0"))
	// A dependency's, at a file position: the go command's words stay.
	assert.Nil(t, notCached("package example.com/conn does not build: example.com/missing: conn/conn.go:6:2: module lookup disabled by GOPROXY=off", "example.com/conn", "v0.1.0"))
}

func TestModuleOf(t *testing.T) {
	mods := []string{"example.com/kv", "example.com/kv/sub", "example.com/kv/v3"}
	for path, want := range map[string]string{
		"example.com/kv":          "example.com/kv",
		"example.com/kv/a":        "example.com/kv",
		"example.com/kv/sub/b":    "example.com/kv/sub",
		"example.com/kvx":         "",
		"example.com/kv/v2/a":     "",
		"example.com/kv/v3/a":     "example.com/kv/v3",
		"example.com/kv/v1/a":     "example.com/kv",
		"example.com/kv/v10":      "",
		"example.com/kv/version2": "example.com/kv",
	} {
		assert.Equal(t, want, ModuleOf(path, mods), path)
	}
}

// The main module's go.mod is the one the loader package names, whichever
// root the go command lists first: listed with every dependency, another
// module's package (the registry's) may come before it.
func TestGoModIsTheLoaderPackages(t *testing.T) {
	registry := &packages.Package{Name: "registry", Module: &packages.Module{Path: RegistryPath, GoMod: "/mod/kvgen/go.mod"}}
	loader := &packages.Package{Name: "kvgenload", Module: &packages.Module{Path: "example.com/host", GoMod: "/src/host/go.mod"}}
	assert.Equal(t, "/src/host/go.mod", (&Listed{roots: []*packages.Package{registry, loader}}).GoMod())
	assert.Empty(t, (&Listed{roots: []*packages.Package{registry}}).GoMod(), "no loader package, no main module's go.mod")
}
