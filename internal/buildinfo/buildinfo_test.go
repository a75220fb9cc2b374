package buildinfo_test

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/kvgen/kvgen/internal/buildinfo"
)

func TestModuleVersion(t *testing.T) {
	info := &debug.BuildInfo{
		Main: debug.Module{Path: "example.com/kvserver", Version: "v1.2.0"},
		Deps: []*debug.Module{
			{Path: "github.com/redis/go-redis/v9", Version: "v9.7.0"},
			{Path: "example.com/kv/lmcache", Version: "v0.3.0", Replace: &debug.Module{Path: "example.com/fork/lmcache", Version: "v0.3.1-fix"}},
			{Path: "example.com/kv/local", Version: "v0.0.0", Replace: &debug.Module{Path: "../local"}},
			// What the go command records for a directory replacement.
			{Path: "example.com/kv/dir", Version: "v0.1.0", Replace: &debug.Module{Path: "./kv/dir", Version: "(devel)"}},
		},
	}
	assert.Equal(t, "v1.2.0", buildinfo.ModuleVersion(info, "example.com/kvserver"), "main module")
	assert.Equal(t, "v9.7.0", buildinfo.ModuleVersion(info, "github.com/redis/go-redis/v9"), "dependency")
	assert.Equal(t, "v0.3.1-fix", buildinfo.ModuleVersion(info, "example.com/kv/lmcache"), "replaced by another version")
	assert.Equal(t, "v0.0.0 => ../local", buildinfo.ModuleVersion(info, "example.com/kv/local"), "replaced by a directory")
	assert.Equal(t, "v0.1.0 => ./kv/dir", buildinfo.ModuleVersion(info, "example.com/kv/dir"), "replaced by a directory, as built")
	assert.Empty(t, buildinfo.ModuleVersion(info, "example.com/kv/absent"), "not linked")
	assert.Empty(t, buildinfo.ModuleVersion(info, ""), "no module")
	assert.Empty(t, buildinfo.ModuleVersion(nil, "example.com/kvserver"), "no build info")

	// A tool that go tool built from a module replaced by a directory: the
	// main module carries the replacement.
	tool := &debug.BuildInfo{Main: debug.Module{Path: "github.com/kvgen/kvgen", Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "../kvgen", Version: "(devel)"}}}
	assert.Equal(t, "v0.0.0-00010101000000-000000000000 => ../kvgen", buildinfo.ModuleVersion(tool, "github.com/kvgen/kvgen"), "main module, replaced")
}
