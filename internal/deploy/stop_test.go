//go:build unix

package deploy_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// holdTool is a -toolexec program that holds the run of a go tool: when the
// tool's path ends in $HOLD_TOOL and its arguments mention $HOLD_MARK, it
// records its process id and its parent's (the go command's) in $HOLD_PIDS
// and sleeps in the tool's place. Every other tool runs as usual.
const holdTool = `#!/bin/sh
case "$*" in *-V=full*) exec "$@" ;; esac
case "$1" in
*"$HOLD_TOOL")
	case "$*" in *"$HOLD_MARK"*)
		echo "$$ $PPID" >> "$HOLD_PIDS"
		exec sleep 300
	esac
esac
exec "$@"
`

// TestStop sends real signals to kvgen while the go command it started is
// running a tool, and checks that kvgen stops the go command and the tool,
// leaves no temporary directory, writes nothing, and exits non-zero.
func TestStop(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvgen and runs the go command")
	}
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("needs sh for the -toolexec program")
	}
	root := kvgentest.Root(t)
	kvgen := kvgentest.KVGen(t)
	hold := filepath.Join(t.TempDir(), "hold")
	require.NoError(t, os.WriteFile(hold, []byte(holdTool), 0o755))

	// SIGHUP is what a closed terminal sends.
	signals := []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP}
	for _, sig := range signals {
		t.Run("build/"+sig.String(), func(t *testing.T) {
			bin := filepath.Join(t.TempDir(), "kvserver")
			before := snapshotRepo(t, root)
			// The link step runs on every build, cached packages or not.
			stopped := runAndStop(t, kvserverDir(root), hold, "/link", "", sig,
				kvgen, "build", "-manifest", "deploy/edge.yaml", "-o", bin, ".")
			assert.Contains(t, stopped.Stderr, "kvgen: compiling .")
			assert.NoFileExists(t, bin)
			assertRepoUnchanged(t, before, snapshotRepo(t, root))
		})
	}

	for _, sig := range signals {
		t.Run("generate/"+sig.String(), func(t *testing.T) {
			dir := stopModule(t)
			// A package no build has compiled before: go list -export
			// must compile it.
			stopped := runAndStop(t, dir, hold, "/compile", "example.com/stop/conn", sig, kvgen)
			assert.Empty(t, stopped.Stdout)
			assert.NoFileExists(t, filepath.Join(dir, "srv", "connectors_gen.go"))
			ents, err := os.ReadDir(filepath.Join(dir, "srv"))
			require.NoError(t, err)
			assert.Len(t, ents, 1, "nothing but main.go in srv")
		})
	}

	// Stopped while it loads the connectors a second time, with the go.mod
	// it linked: that stop once ended in a panic.
	for _, sig := range signals {
		t.Run("generate-linking/"+sig.String(), func(t *testing.T) {
			dir := stopLinkModule(t)
			gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			require.NoError(t, err)
			stopped := runAndStop(t, dir, hold, "/compile", "example.com/stoplink", sig, kvgen)
			assert.NotContains(t, stopped.Stderr, "panic")
			assert.NoFileExists(t, filepath.Join(dir, "srv", "connectors_gen.go"))
			after, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			require.NoError(t, err)
			assert.Equal(t, string(gomod), string(after), "go.mod changed")
		})
	}
}

// TestStopAtAnyMoment signals kvgen generate at moments spread over a
// whole run that links a module into go.mod: whenever the signal comes, kvgen
// either finishes or stops the documented way, never panics, leaves no
// temporary directory, and leaves go.mod either as it was or fully linked.
func TestStopAtAnyMoment(t *testing.T) {
	if testing.Short() {
		t.Skip("builds kvgen and runs the go command")
	}
	kvgen := kvgentest.KVGen(t)
	// How long one run takes, caches warm.
	start := time.Now()
	res := kvgentest.Run(t, stopLinkModule(t), []string{goFlags()}, kvgentest.BuildTimeout, kvgen)
	require.Equal(t, 0, res.Code, res.Stderr)
	whole := time.Since(start)
	const moments = 12
	stopped := 0
	for i := range moments {
		delay := whole * time.Duration(i) / (moments - 2) // the last ones come after the end
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGHUP} {
			dir := stopLinkModule(t)
			gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			require.NoError(t, err)
			tmp := t.TempDir()
			cmd := exec.Command(kvgen)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "GOTMPDIR=", "KVGENCACHE=off", goFlags())
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			require.NoError(t, cmd.Start())
			// Count from kvgen's first temporary directory: by then it
			// handles signals. Before, a signal ends it with nothing to
			// clean up.
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			for started := false; !started; {
				select {
				case err = <-exited:
					t.Fatalf("kvgen ended before it made a temporary directory: %v\n%s", err, stderr.String())
				case <-time.After(time.Millisecond):
				}
				ents, _ := os.ReadDir(tmp)
				started = len(ents) > 0
			}
			time.Sleep(delay)
			cmd.Process.Signal(sig)
			err = <-exited
			code := cmd.ProcessState.ExitCode()
			at := fmt.Sprintf("%v after %v: %v\n%s", sig, delay, err, stderr.String())
			assert.NotContains(t, stderr.String(), "panic", at)
			if code != 0 {
				stopped++
				assert.Equal(t, 1, code, at)
				assert.Contains(t, stderr.String(), "kvgen: stopped by "+sig.String(), at)
			}
			after, err := os.ReadFile(filepath.Join(dir, "go.mod"))
			require.NoError(t, err)
			if !bytes.Equal(after, gomod) {
				assert.Contains(t, string(after), "example.com/stoplink => ../stoplink", at)
			}
			left, err := os.ReadDir(tmp)
			require.NoError(t, err)
			assert.Empty(t, left, "temporary files left behind: %s", at)
		}
	}
	assert.Greater(t, stopped, moments/2, "most signals came while kvgen ran")
}

// stopLinkModule is stopModule with the connector in a module of its own
// beside it, which the manifest names with replace: and go.mod lacks.
func stopLinkModule(t *testing.T) string {
	t.Helper()
	dir := kvgentest.Module(t, "example.com/stop", map[string]string{
		"connectors.yaml": "version: 1\noutput: srv/connectors_gen.go\nconnectors:\n  - name: conn\n    import: example.com/stoplink\n    constructor: New\n    replace: ../stoplink\n",
		"srv/main.go":     "package main\n\nfunc main() { _ = Registry }\n",
	})
	conn := kvgentest.Module(t, "example.com/stoplink", map[string]string{"conn.go": freshConnector(t, "stoplink")})
	// Each pair in a directory of its own, side by side.
	base := t.TempDir()
	require.NoError(t, os.Rename(dir, filepath.Join(base, "host")))
	require.NoError(t, os.Rename(conn, filepath.Join(base, "stoplink")))
	return filepath.Join(base, "host")
}

// freshConnector is the source of a connector package that no build has
// compiled before.
func freshConnector(t *testing.T, pkg string) string {
	return "package " + pkg + `

import (
	"context"

	"github.com/kvgen/kvgen/registry/kv"
)

const built = ` + strconv.Quote(t.Name()+time.Now().String()) + `

func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return nil, nil
}
`
}

// runAndStop runs a command in dir with the go command's tools passed
// through hold, sends sig to it once the go command holds a tool, and
// checks how it ended.
func runAndStop(t *testing.T, dir, hold, tool, mark string, sig syscall.Signal, name string, args ...string) kvgentest.Result {
	t.Helper()
	tmp := t.TempDir() // the command's TMPDIR: what it leaves there is left behind
	pids := filepath.Join(t.TempDir(), "pids")
	ctx, cancel := context.WithTimeout(context.Background(), kvgentest.BuildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(),
		"TMPDIR="+tmp, "GOTMPDIR=", "KVGENCACHE=off",
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -buildvcs=false -toolexec="+hold),
		"HOLD_TOOL="+tool, "HOLD_MARK="+mark, "HOLD_PIDS="+pids)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Start())

	var held []int
	for held == nil {
		select {
		case <-ctx.Done():
			t.Fatalf("the go command never ran the tool to hold; stderr:\n%s", stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
		data, _ := os.ReadFile(pids)
		if line, _, ok := strings.Cut(string(data), "\n"); ok {
			for _, f := range strings.Fields(line) {
				pid, err := strconv.Atoi(f)
				require.NoError(t, err)
				held = append(held, pid)
			}
		}
	}
	require.NoError(t, cmd.Process.Signal(sig))
	err := cmd.Wait()
	require.NoError(t, ctx.Err(), "kvgen did not stop; stderr:\n%s", stderr.String())
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "kvgen must exit non-zero after %v: %v\nstderr:\n%s", sig, err, stderr.String())
	res := kvgentest.Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: exit.ExitCode()}
	assert.Equal(t, 1, res.Code)
	assert.Contains(t, res.Stderr, "kvgen: stopped by "+sig.String())

	// The held tool and the go command that ran it are gone; the go
	// command's work directory and kvgen's are removed.
	for _, pid := range held {
		assertGone(t, pid)
	}
	left, err := os.ReadDir(tmp)
	require.NoError(t, err)
	var names []string
	for _, e := range left {
		names = append(names, e.Name())
	}
	assert.Empty(t, names, "temporary files left behind")
	return res
}

// assertGone checks that process pid has ended. It may linger a moment as a
// zombie, ended but not yet reaped by whoever inherited it.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			return
		}
		if err == nil {
			// The state follows the command name in parentheses.
			if i := bytes.LastIndexByte(stat, ')'); i >= 0 && bytes.HasPrefix(stat[i+1:], []byte(" Z")) {
				return
			}
		} else if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("process %d still runs: %s", pid, stat)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stopModule is a module that requires this checkout of kvgen, with one
// connector and a main package to generate the registry into.
func stopModule(t *testing.T) string {
	t.Helper()
	return kvgentest.Module(t, "example.com/stop", map[string]string{
		"connectors.yaml": "version: 1\noutput: srv/connectors_gen.go\nconnectors:\n  - name: conn\n    import: example.com/stop/conn\n    constructor: New\n",
		// A fresh constant: this package is in no build cache.
		"conn/conn.go": freshConnector(t, "conn"),
		"srv/main.go":  "package main\n\nfunc main() { _ = Registry }\n",
	})
}
