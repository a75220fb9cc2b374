package gocmd

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A failed run is the go command's own words on one line, named by its
// subcommand; a stopped run says why it stopped.
func TestRunReportsTheGoCommandsWords(t *testing.T) {
	dir := t.TempDir()
	env := append(os.Environ(), "GOFLAGS=", "GO111MODULE=on", "GOWORK=off")
	stdout, _, err := Run(t.Context(), dir, env, "env", "GOOS")
	require.NoError(t, err)
	assert.NotEmpty(t, strings.TrimSpace(string(stdout)))

	_, stderr, err := Run(t.Context(), dir, env, "list", "./nosuchpackage")
	var ge *Error
	require.ErrorAs(t, err, &ge)
	assert.NotEmpty(t, stderr)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "go list: "), msg)
	assert.NotContains(t, msg, "\n")
	assert.NotContains(t, msg, "go: ", "the go command's prefixes are dropped")

	ctx, cancel := context.WithCancelCause(t.Context())
	stop := errors.New("stopped")
	cancel(stop)
	_, _, err = Run(ctx, dir, env, "env", "GOOS")
	assert.ErrorIs(t, err, stop)
}

// ReadOnlyModules takes -mod=mod out of GOFLAGS, from the go env file as
// from the environment, and sets GOFLAGS in what it returns: calling it
// again on that runs no go command.
func TestReadOnlyModules(t *testing.T) {
	home := t.TempDir()
	goenv := home + "/go.env"
	require.NoError(t, os.WriteFile(goenv, []byte("GOFLAGS=-mod=mod -tags=edge\n"), 0o644))
	env := append(os.Environ(), "GOENV="+goenv, "GOFLAGS=")
	got, err := ReadOnlyModules(t.Context(), home, env)
	require.NoError(t, err)
	assert.Equal(t, "-tags=edge", Lookup(got, "GOFLAGS"))

	// A go command could not start in a directory that is not there.
	nowhere := home + "/nowhere"
	again, err := ReadOnlyModules(t.Context(), nowhere, got)
	require.NoError(t, err, "a second call must not run the go command")
	assert.Equal(t, "-tags=edge", Lookup(again, "GOFLAGS"))

	got, err = ReadOnlyModules(t.Context(), nowhere, append(got, "GOFLAGS=--mod=mod"))
	require.NoError(t, err)
	assert.Equal(t, " ", Lookup(got, "GOFLAGS"), "a space, so that the go env file's GOFLAGS do not apply again")

	// Other variables come from the same go env run, GOFLAGS set or not.
	for _, env := range [][]string{env, append(slices.Clip(env), "GOFLAGS=-mod=mod")} {
		got, values, err := ReadOnlyModulesEnv(t.Context(), home, append(env, "GOOS=plan9", "GOARCH=arm"), "GOOS", "GOARCH")
		require.NoError(t, err)
		assert.Equal(t, []string{"plan9", "arm"}, values)
		assert.NotContains(t, Lookup(got, "GOFLAGS"), "mod")
	}

	// Asked for no variable, it says none, even when it asked go env for
	// GOFLAGS: a caller tells "not asked" from the answer by nil.
	for _, env := range [][]string{env, append(slices.Clip(env), "GOFLAGS=-mod=mod")} {
		_, values, err := ReadOnlyModulesEnv(t.Context(), home, env)
		require.NoError(t, err)
		assert.Nil(t, values)
	}
}

// The go command sees the directory it runs in as Run names it, symbolic
// links and all, whatever the caller's own working directory: paths it
// reports (GOMOD, an overlay's) match the ones the caller gave.
func TestRunNamesTheDirectoryAsGiven(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("PWD is a POSIX convention")
	}
	real := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(real, "go.mod"), []byte("module example.com/m\n"), 0o644))
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(real, link))
	env := append(os.Environ(), "GOFLAGS=", "GO111MODULE=on", "GOWORK=off")
	stdout, _, err := Run(t.Context(), link, env, "env", "GOMOD")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(link, "go.mod"), strings.TrimSpace(string(stdout)))
}

// A scratch go.mod given with -modfile is not named in the go command's
// words: it is gone once kvgen stops.
func TestRunHidesTheScratchGoMod(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n"), 0o644))
	scratch := filepath.Join(t.TempDir(), "mod-1")
	require.NoError(t, os.Mkdir(scratch, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(scratch, "go.mod"), []byte("module example.com/m\nrequire broken\n"), 0o644))
	env := append(os.Environ(), "GOFLAGS=", "GO111MODULE=on", "GOWORK=off")
	_, _, err := Run(t.Context(), dir, env, "list", "-modfile="+filepath.Join(scratch, "go.mod"), ".")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "mod-1", err.Error())
	assert.Contains(t, err.Error(), "go.mod")
}
