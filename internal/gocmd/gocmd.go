// Package gocmd runs the go command so that stopping kvgen stops it whole.
//
// The go command starts compilers, linkers and tools of its own. Killing
// only the go command, as exec.CommandContext does, leaves those running and
// leaves the go command's work directory behind. Here the go command runs
// in a process group of its own; when the context ends, the whole group is
// interrupted, as Ctrl-C in a terminal would do, so that the tools stop and
// the go command cleans up, and whatever still runs after a grace period is
// killed.
package gocmd

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// grace is how long the go command and its tools have to stop after an
// interrupt before they are killed.
const grace = 10 * time.Second

// Cmd is a go command run.
type Cmd struct {
	*exec.Cmd
	exited chan struct{}
}

// Command returns a run of the go command with args, stopped as the
// package describes when ctx ends. Run it with Run.
func Command(ctx context.Context, args ...string) *Cmd {
	c := &Cmd{Cmd: exec.CommandContext(ctx, "go", args...), exited: make(chan struct{})}
	ownGroup(c.Cmd)
	c.Cancel = func() error {
		err := signalGroup(c.Cmd, interrupt)
		go func() {
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-t.C:
				signalGroup(c.Cmd, kill)
			case <-c.exited:
			}
		}()
		return err
	}
	// After the grace period exec kills the go command itself, should the
	// group kill above have missed it, and stops waiting for its output.
	c.WaitDelay = grace + time.Second
	return c
}

// Run starts the go command and waits for it to finish.
func (c *Cmd) Run() error {
	defer close(c.exited)
	return c.Cmd.Run()
}

// WithTempDir returns env with GOTMPDIR set to dir, an existing
// directory: the go command then makes its work directory there. A go
// command stopped by a signal cannot remove its work directory, and
// `go build` does not even try; removing dir does.
func WithTempDir(env []string, dir string) []string {
	return append(slices.Clip(env), "GOTMPDIR="+dir)
}

// WithoutWorkspace returns env outside workspace mode, for go commands
// given a scratch go.mod with -modfile: the go command refuses -modfile in
// workspace mode, and the go.mod is edited for its module alone.
func WithoutWorkspace(env []string) []string {
	return append(slices.Clip(env), "GOWORK=off")
}

// listGOGC is the garbage collector's target for the go command's package
// listings when the caller sets none. Such a listing lives for a tenth of
// a second, and at the default of 100 collecting its heap took a fifth of
// its processor time (go list -export of 117 and of 350 packages, warm);
// at 200 most of that time goes, and the peak memory grows by a third.
const listGOGC = "GOGC=200"

// ForListing returns env for a go list run: with GOGC=200 unless env sets
// GOGC. A nil env is the process's environment, as for exec.
func ForListing(env []string) []string {
	if env == nil {
		env = os.Environ()
	}
	for _, kv := range env {
		if strings.HasPrefix(kv, "GOGC=") {
			return env
		}
	}
	return append(slices.Clip(env), listGOGC)
}

// TempDir makes a temporary directory for the go commands of one kvgen run,
// under the GOTMPDIR of env when that is set, as the go command would,
// else under its TMPDIR, else the system's temporary directory.
func TempDir(env []string) (string, error) {
	dir := Lookup(env, "GOTMPDIR")
	if dir == "" {
		dir = Lookup(env, "TMPDIR")
	}
	return os.MkdirTemp(dir, "kvgen-")
}

// Lookup returns the value of key in env, the last one as os/exec takes it.
func Lookup(env []string, key string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], key+"="); ok {
			return v
		}
	}
	return ""
}

// ReadOnlyModules returns env with -mod=mod taken out of the GOFLAGS the
// go command would use, whether env or the go env file sets them. With
// -mod=mod, go list and go build add to go.mod and go.sum whatever they
// find missing (the latest version of a module, not the manifest's); kvgen
// changes those files only where it says so, and its read-only commands
// never. Without it the go command's default holds: read-only, or the
// vendor directory.
func ReadOnlyModules(ctx context.Context, dir string, env []string) ([]string, error) {
	env, _, err := ReadOnlyModulesEnv(ctx, dir, env)
	return env, err
}

// envRuns counts go env runs (EnvValues).
var envRuns atomic.Int64

// EnvRuns is how many go env runs have answered so far, in this process:
// tests count them.
func EnvRuns() int64 { return envRuns.Load() }

// EnvValues returns what go env says of the variables keys, one value
// each, in one go command run in dir.
func EnvValues(ctx context.Context, dir string, env []string, keys ...string) ([]string, error) {
	envRuns.Add(1)
	stdout, _, err := Run(ctx, dir, env, append([]string{"env"}, keys...)...)
	if err != nil {
		return nil, err
	}
	// One line a variable; no value holds a newline.
	values := strings.SplitN(strings.TrimSuffix(string(stdout), "\n"), "\n", len(keys))
	if len(values) != len(keys) {
		return nil, fmt.Errorf("go env %s printed %d lines, not %d", strings.Join(keys, " "), len(values), len(keys))
	}
	return values, nil
}

// ReadOnlyModulesEnv is ReadOnlyModules, and returns as well what the go
// command says of the variables keys (go env keys...), one value each, or
// nil for no keys: one go command run answers both.
func ReadOnlyModulesEnv(ctx context.Context, dir string, env []string, keys ...string) ([]string, []string, error) {
	value := Lookup(env, "GOFLAGS")
	ask := keys
	if value == "" {
		// Not set in env: the go env file's apply, if it has any.
		ask = append([]string{"GOFLAGS"}, keys...)
	}
	var values []string
	if len(ask) > 0 {
		var err error
		if values, err = EnvValues(ctx, dir, env, ask...); err != nil {
			return nil, nil, err
		}
		if value == "" {
			value, values = values[0], values[1:]
		}
	}
	if len(keys) == 0 {
		// Not an empty answer, which gen reads as go env's values: with
		// GOFLAGS unset, as on most machines, list and doc indexed it.
		values = nil
	}
	kept := slices.DeleteFunc(strings.Fields(value), func(f string) bool {
		name, value, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(f, "-"), "-"), "=")
		return name == "mod" && value == "mod"
	})
	// The result sets GOFLAGS itself, so that a second call, such as gen's
	// under kvgen build, runs no go command. GOFLAGS values hold no spaces,
	// so the fields join back as they were. An empty GOFLAGS is as good as
	// none, and the go env file's would apply again: a space sets no flag
	// and is not empty.
	return append(slices.Clip(env), "GOFLAGS="+cmp.Or(strings.Join(kept, " "), " ")), values, nil
}
