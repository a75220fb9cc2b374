package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	// buildTimeout bounds one go build or kvgen build; the first build of
	// the datacenter binary compiles go-redis.
	buildTimeout = 5 * time.Minute
	// serverTimeout bounds one run of a built kvserver.
	serverTimeout = 30 * time.Second
)

// result is what a finished process left.
type result struct {
	stdout, stderr string
	code           int
}

// execute runs name in dir with env added to the test's environment, and
// fails the test if it does not exit within timeout.
func execute(t testing.TB, dir string, env []string, timeout time.Duration, name string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	// The user's check cache is not the tests' to write; env may say
	// otherwise.
	cmd.Env = append(append(os.Environ(), "KVGENCACHE=off"), env...)
	// A child that keeps the output pipes open must not outlast the bound.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: not done within %s\nstderr:\n%s", name, strings.Join(args, " "), timeout, stderr.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
	return result{stdout: stdout.String(), stderr: stderr.String(), code: cmd.ProcessState.ExitCode()}
}

// goFlags returns GOFLAGS for the go commands the tests start, with VCS
// stamping off: the main module's version is then "(devel)" in every
// checkout, clean or not.
func goFlags() string {
	return "GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=false")
}

// repoRoot is the root of the module under test, two levels above this
// package.
func repoRoot(t testing.TB) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	require.FileExists(t, filepath.Join(root, "go.mod"))
	return root
}

// kvserverDir is the example server's module, which the deployment
// manifests in its deploy directory build.
func kvserverDir(root string) string {
	return filepath.Join(root, "examples", "kvserver")
}

// buildKVGen builds the kvgen command of the module at root into a
// temporary directory.
func buildKVGen(t testing.TB, root string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kvgen")
	res := execute(t, root, nil, buildTimeout, "go", "build", "-o", bin, "./cmd/kvgen")
	require.Equal(t, 0, res.code, "go build ./cmd/kvgen:\n%s", res.stderr)
	return bin
}

// kvgenBuild runs `kvgen build` of the example server in its module, as
// a user would, and fails the test if it does not write bin.
func kvgenBuild(t testing.TB, root, kvgen, manifest, bin string) {
	t.Helper()
	res := execute(t, kvserverDir(root), []string{goFlags()}, buildTimeout,
		kvgen, "build", "-manifest", manifest, "-o", bin, ".")
	require.Equal(t, 0, res.code, "kvgen build -manifest %s:\n%s", manifest, res.stderr)
	require.FileExists(t, bin)
}

// runServer runs a built kvserver.
func runServer(t testing.TB, bin string, args ...string) result {
	t.Helper()
	return execute(t, "", nil, serverTimeout, bin, args...)
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
	res := execute(t, root, nil, time.Minute, "git", "--no-optional-locks", "status", "--porcelain", "--untracked-files=all")
	require.Equal(t, 0, res.code, "git status:\n%s", res.stderr)
	s := repoState{status: res.stdout, files: map[string][]byte{}}
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
