package pipeline

import (
	"testing"

	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/kvgentest"
)

// A changed input to a constructor's check is a new key in the cache:
// every field of gen.CheckInput, walked by reflection.
func TestCheckKeyHoldsEveryField(t *testing.T) {
	cache := &manifestCache{path: "cache.json", salt: "kvgen-test"}
	in := gen.CheckInput{
		RegistryExport: "aaaa-d", ContractExport: "bbbb-d", PackageExport: "cccc-d",
		Factory: "example.com/text.Transform", Roles: []gen.Role{{Name: "worker", Interface: "Worker"}}, Registry: "NewRegistry",
		ImportPath: "example.com/shout", Constructor: "New", EntryRoles: []string{"worker"},
	}
	kvgentest.EachChange(t, &in, func() string { return cache.Key(in) }, nil)
}

// A changed input to a run is a new warm key, so that the run loads and
// checks its packages: every field of warmInput, walked by reflection.
func TestWarmKeyHoldsEveryField(t *testing.T) {
	cache := &manifestCache{path: "cache.json", salt: "kvgen-test"}
	in := warmInput{
		Generator: "kvgen-check-1 kvgen v0.1.0",
		WorkDir:   "/src/host", Manifest: "connectors.yaml", Output: "reg/connectors_gen.go",
		Only: []string{"redis"}, NoOnly: false,
		Tags: []string{"prod"}, TrimPath: true, LoadDir: "/src/host/reg",
		Manifests: "aaaa",
		File:      "/src/host/reg/connectors_gen.go",
		GoMod:     "/src/host/go.mod", GoModSHA256: "bbbb", GoSumSHA256: "cccc",
		Package: "reg", Declared: map[string]bool{"Version": true},
		GoEnv: []string{"go1.26.0", "linux", "amd64"}, GoFlags: "-trimpath",
		GoDebug: "gotypesalias=1", OwnGoDebug: "gotypesalias=1",
	}
	kvgentest.EachChange(t, &in, func() string { return cache.hash(in) }, nil)
}
