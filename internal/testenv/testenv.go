// Package testenv is what the repository's test command (internal/testall)
// and its tests (internal/kvgentest) share, without the network packages
// kvgentest brings: go run compiles testall in the user's environment, and
// whatever it imports is compiled once more for it alone.
package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/mod/modfile"
)

// Path is kvgen's module path.
const Path = "github.com/kvgen/kvgen"

// startDir is the program's working directory before anything changes it:
// a test binary's is its package's directory.
var startDir, startDirErr = os.Getwd()

// Root is the root directory of this checkout: the nearest directory at
// or above the working directory the program started in whose go.mod is
// kvgen's.
var Root = sync.OnceValues(func() (string, error) {
	if startDirErr != nil {
		return "", startDirErr
	}
	for dir := startDir; ; {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && modfile.ModulePath(data) == Path {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no directory at or above %s holds the go.mod of %s: run it inside kvgen's repository", startDir, Path)
		}
		dir = parent
	}
})

// Static is CGO_ENABLED=0 for the go commands the tests start, unless the
// environment sets CGO_ENABLED or its GOFLAGS asks for a sanitizer, which
// needs cgo. kvgen build's images hold static binaries, built with
// CGO_ENABLED=0; with the rest built so too, one build configuration
// serves both, and nothing the tests build calls a C compiler.
func Static() []string {
	if _, ok := os.LookupEnv("CGO_ENABLED"); ok {
		return nil
	}
	for _, f := range strings.Fields(os.Getenv("GOFLAGS")) {
		switch name, _, _ := strings.Cut(strings.TrimLeft(f, "-"), "="); name {
		case "race", "msan", "asan":
			return nil
		}
	}
	return []string{"CGO_ENABLED=0"}
}
