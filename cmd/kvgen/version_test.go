package main

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
)

// A version names kvgen's code exactly only when the go command recorded a
// release or a clean commit: the cache trusts it across binaries.
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

// The cache's identity of a release names whose code it is: a fork that
// replaces kvgen at upstream's version string is another generator.
func TestReleaseIn(t *testing.T) {
	dep := func(m debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/host", Version: "(devel)"}, Deps: []*debug.Module{&m}}
	}
	upstream := releaseIn(dep(debug.Module{Path: kvgenModule, Version: "v0.2.0"}))
	fork := releaseIn(dep(debug.Module{Path: kvgenModule, Version: "v0.2.0", Replace: &debug.Module{Path: "example.com/fork", Version: "v0.2.0"}}))
	assert.Equal(t, kvgenModule+"@v0.2.0", upstream)
	assert.Equal(t, "example.com/fork@v0.2.0", fork)
	assert.Equal(t, kvgenModule+"@v0.3.0", releaseIn(&debug.BuildInfo{Main: debug.Module{Path: kvgenModule, Version: "v0.3.0"}}))
	// Built from a checkout at a tag: the commit tells a fork that kept
	// the path and the tag's name from upstream; a host's commit is not
	// kvgen's.
	rev := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123456789abcdef01234567"}}
	assert.Equal(t, kvgenModule+"@v0.3.0 0123456789abcdef0123456789abcdef01234567",
		releaseIn(&debug.BuildInfo{Main: debug.Module{Path: kvgenModule, Version: "v0.3.0"}, Settings: rev}))
	hosted := dep(debug.Module{Path: kvgenModule, Version: "v0.2.0"})
	hosted.Settings = rev
	assert.Equal(t, upstream, releaseIn(hosted))
	assert.Empty(t, releaseIn(dep(debug.Module{Path: kvgenModule, Version: "v0.2.0", Replace: &debug.Module{Path: "../kvgen"}})))
	assert.Empty(t, releaseIn(nil))
}

// kvgen version -json says which commit and Go built kvgen, and whether
// the checkout was modified, from whatever the go command recorded.
func TestVersionOf(t *testing.T) {
	const rev = "0123456789abcdef0123456789abcdef01234567"
	vcs := func(modified string) []debug.BuildSetting {
		return []debug.BuildSetting{{Key: "vcs", Value: "git"}, {Key: "vcs.revision", Value: rev}, {Key: "vcs.modified", Value: modified}}
	}
	for _, tc := range []struct {
		name string
		info *debug.BuildInfo
		want kvgenVersion
	}{
		{"a release", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: kvgenModule, Version: "v0.3.0"}},
			kvgenVersion{Version: "v0.3.0", Go: "go1.26.0"}},
		{"a pseudo-version", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: kvgenModule, Version: "v0.3.1-0.20261201050000-0123456789ab"}},
			kvgenVersion{Version: "v0.3.1-0.20261201050000-0123456789ab", Go: "go1.26.0", Revision: "0123456789ab"}},
		{"a checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: kvgenModule, Version: "v0.3.1-0.20261201050000-0123456789ab"}, Settings: vcs("false")},
			kvgenVersion{Version: "v0.3.1-0.20261201050000-0123456789ab", Go: "go1.26.0", Revision: rev}},
		{"a modified checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: kvgenModule, Version: "v0.3.1-0.20261201050000-0123456789ab+dirty"}, Settings: vcs("true")},
			kvgenVersion{Version: "v0.3.1-0.20261201050000-0123456789ab+dirty", Go: "go1.26.0", Revision: rev, Dirty: true}},
		{"+dirty alone", &debug.BuildInfo{Main: debug.Module{Path: kvgenModule, Version: "v0.3.1-0.20261201050000-0123456789ab+dirty"}},
			kvgenVersion{Version: "v0.3.1-0.20261201050000-0123456789ab+dirty", Revision: "0123456789ab", Dirty: true}},
		// Another module's checkout says nothing of kvgen's.
		{"built in another module", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: "example.com/host", Version: "(devel)"}, Deps: []*debug.Module{{Path: kvgenModule, Version: "v0.2.0"}}, Settings: vcs("true")},
			kvgenVersion{Version: "v0.2.0", Go: "go1.26.0"}},
		{"replaced by a directory", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: kvgenModule, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "../kvgen", Version: "(devel)"}}},
			kvgenVersion{Version: "v0.0.0-00010101000000-000000000000 => ../kvgen", Go: "go1.26.0"}},
		{"unstamped", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: kvgenModule, Version: "(devel)"}},
			kvgenVersion{Version: "(devel)", Go: "go1.26.0"}},
		{"no build info", nil, kvgenVersion{Version: "(devel)"}},
	} {
		assert.Equal(t, tc.want, versionOf(tc.info), tc.name)
	}
}
