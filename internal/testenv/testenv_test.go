package testenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The tests' go commands build static binaries unless the environment
// chose cgo, or a sanitizer that needs it.
func TestStatic(t *testing.T) {
	for _, c := range []struct {
		name   string
		env    map[string]string
		static bool
	}{
		{"nothing set", nil, true},
		{"other flags", map[string]string{"GOFLAGS": "-trimpath -ldflags=-w"}, true},
		{"cgo chosen", map[string]string{"CGO_ENABLED": "1"}, false},
		{"cgo refused", map[string]string{"CGO_ENABLED": "0"}, false}, // already so: nothing to add
		{"race", map[string]string{"GOFLAGS": "-trimpath -race"}, false},
		{"msan", map[string]string{"GOFLAGS": "--msan"}, false},
		{"asan", map[string]string{"GOFLAGS": "-asan=true"}, false},
		{"a flag named like one", map[string]string{"GOFLAGS": "-tags=race"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("GOFLAGS", "")
			t.Setenv("CGO_ENABLED", "")
			os.Unsetenv("GOFLAGS")
			os.Unsetenv("CGO_ENABLED")
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			if c.static {
				assert.Equal(t, []string{"CGO_ENABLED=0"}, Static())
			} else {
				assert.Nil(t, Static())
			}
		})
	}
}

// Root finds this checkout from a package directory below it.
func TestRoot(t *testing.T) {
	root, err := Root()
	if assert.NoError(t, err) {
		assert.FileExists(t, filepath.Join(root, "internal", "testenv", "testenv.go"))
	}
}

// kvgen is built for the tests from the scripts' module cache, filled
// from the user's module cache's downloads before any proxy.
func TestToolEnv(t *testing.T) {
	// The user cache directory is XDG_CACHE_HOME's on Linux. HOME stays:
	// go env may leave its telemetry there after it exits.
	cache := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", cache)
	user := filepath.Join(t.TempDir(), "mod")
	env, err := ToolEnv(append(os.Environ(), "GOMODCACHE="+user, "GOPROXY=https://proxy.example,off", "GOENV=off"))
	assert.NoError(t, err)
	gopath, err := ScriptGoPath()
	assert.NoError(t, err)
	assert.Equal(t, []string{
		"GOPATH=" + gopath,
		"GOMODCACHE=" + filepath.Join(gopath, "pkg", "mod"),
		"GOPROXY=file://" + filepath.ToSlash(filepath.Join(user, "cache", "download")) + ",https://proxy.example,off",
	}, env)
	assert.True(t, strings.HasPrefix(gopath, cache), "%s is not in the user cache directory %s", gopath, cache)
}
