package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A version names kvgen's code exactly only when the go command recorded a
// release or a clean commit: the check cache trusts it across binaries.
func TestVersionIn(t *testing.T) {
	dep := func(m debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/host", Version: "(devel)"}, Deps: []*debug.Module{&m}}
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want string
	}{
		{"main, tagged", &debug.BuildInfo{Main: debug.Module{Path: kvgenModule, Version: "v0.3.0"}}, "v0.3.0"},
		{"main, a clean commit", &debug.BuildInfo{Main: debug.Module{Path: kvgenModule, Version: "v0.3.1-0.20261201050000-0123456789ab"}}, "v0.3.1-0.20261201050000-0123456789ab"},
		{"main, a modified checkout", &debug.BuildInfo{Main: debug.Module{Path: kvgenModule, Version: "v0.3.1-0.20261201050000-0123456789ab+dirty"}}, ""},
		{"main, unstamped", &debug.BuildInfo{Main: debug.Module{Path: kvgenModule, Version: "(devel)"}}, ""},
		// go tool makes the tool's module the main one, replacement and all.
		{"go tool, replaced by a checkout", &debug.BuildInfo{Main: debug.Module{Path: kvgenModule, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "../kvgen", Version: "(devel)"}}}, ""},
		{"a tool's dependency", dep(debug.Module{Path: kvgenModule, Version: "v0.2.0"}), "v0.2.0"},
		{"replaced by a version", dep(debug.Module{Path: kvgenModule, Version: "v0.2.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.2.1"}}), "v0.2.1"},
		{"replaced by a directory", dep(debug.Module{Path: kvgenModule, Version: "v0.2.0", Replace: &debug.Module{Path: "../kvgen"}}), ""},
		{"not linked", dep(debug.Module{Path: "example.com/other", Version: "v1.0.0"}), ""},
		{"no build info", nil, ""},
	} {
		assert.Equal(t, tc.want, versionIn(tc.info), tc.name)
	}
}
