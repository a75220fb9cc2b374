package deploy_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// serverTimeout bounds one run of a built kvserver.
const serverTimeout = 30 * time.Second

// TestMain removes the kvgen command the tests share when they are done.
func TestMain(m *testing.M) { os.Exit(kvgentest.Main(m).Run()) }

// goFlags returns GOFLAGS for the go commands the tests start, with VCS
// stamping off: the main module's version is then "(devel)" in every
// checkout, clean or not.
func goFlags() string {
	return "GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=false")
}

// kvserverDir is the example server's module, which the deployment
// manifests in its deploy directory build.
func kvserverDir(root string) string {
	return filepath.Join(root, "examples", "kvserver")
}

// kvgenBuild runs `kvgen build` of the example server in its module, as
// a user would, and fails the test if it does not write bin.
func kvgenBuild(t testing.TB, root, kvgen, manifest, bin string) {
	t.Helper()
	res := kvgentest.Run(t, kvserverDir(root), []string{goFlags()}, kvgentest.BuildTimeout,
		kvgen, "build", "-manifest", manifest, "-o", bin, ".")
	require.Equal(t, 0, res.Code, "kvgen build -manifest %s:\n%s", manifest, res.Stderr)
	require.FileExists(t, bin)
}

// runServer runs a built kvserver.
func runServer(t testing.TB, bin string, args ...string) kvgentest.Result {
	t.Helper()
	return kvgentest.Run(t, "", nil, serverTimeout, bin, args...)
}

// repoState is what a deployment build must leave as it found it.
type repoState struct {
	status string            // git status --porcelain, untracked files listed one by one
	files  map[string][]byte // files kvgen build works around, by path from the root
}

// untouched are the files that kvgen build replaces with temporary copies.
var untouched = []string{"go.mod", "go.sum", "examples/kvserver/go.mod", "examples/kvserver/go.sum", "examples/kvserver/connectors_gen.go"}

func snapshotRepo(t testing.TB, root string) repoState {
	t.Helper()
	// --no-optional-locks: a status check must not write the index.
	res := kvgentest.Run(t, root, nil, time.Minute, "git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=all")
	require.Equal(t, 0, res.Code, "git status:\n%s", res.Stderr)
	s := repoState{status: res.Stdout, files: map[string][]byte{}}
	for _, name := range untouched {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		require.NoError(t, err)
		s.files[name] = data
	}
	return s
}

func assertRepoUnchanged(t testing.TB, before, after repoState) {
	t.Helper()
	assert.Equal(t, before.status, after.status, "git status --porcelain changed")
	for _, name := range untouched {
		assert.True(t, bytes.Equal(before.files[name], after.files[name]), "%s changed", name)
	}
}
