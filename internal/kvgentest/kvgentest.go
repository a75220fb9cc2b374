// Package kvgentest gives the tests of every module in this repository
// what they share: the root of this checkout of kvgen, throwaway modules
// that require it (module.go), its kvgen command built once per test
// binary, programs built and run with a bound, and distribution's
// registry serving on loopback (registry.go).
package kvgentest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvgen/kvgen/internal/testenv"
)

// Path is kvgen's module path.
const Path = testenv.Path

// BuildTimeout bounds one go build the tests run; a cold build cache
// compiles every dependency.
const BuildTimeout = 5 * time.Minute

// Root is the root directory of this checkout: the nearest directory
// above the test's package whose go.mod is kvgen's. The example modules
// lie below it, so their tests find it too.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := testenv.Root()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// Runner is what TestMain runs: a *testing.M, or what wraps one.
type Runner interface{ Run() int }

// shared is the directory of SharedDir, made at the first call; main
// says whether Main runs the tests, and so will remove it.
var shared struct {
	sync.Mutex
	dir  string
	main bool
}

// Main wraps m so that its Run runs the tests and then removes the
// directory they shared (SharedDir, where KVGen builds). A test package
// whose tests call either runs them through it, from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(kvgentest.Main(m).Run()) }
//
// Main also adds -trimpath to the GOFLAGS of the test binary's
// environment, which the go commands the tests start inherit: kvgen build
// compiles with -trimpath, so the rest compiles so too, and the tests
// share one build configuration instead of compiling the standard library
// and every dependency twice. It adds two more, unless the user's GOFLAGS
// sets them: -ldflags=-w, since the programs the tests link need no DWARF,
// a fifth of a link (a -ldflags on a go command's line still wins); and
// -buildvcs=false, since stamping a program built inside this checkout
// runs git status there, which rewrites .git, an input of the tests that
// read this checkout, so that go test could never replay their results.
//
// And it sets testenv.Static's CGO_ENABLED=0. (go test builds the test
// binary itself, with -race, before Main runs, as the environment says.)
//
// It changes the environment only once Run is called, to run the tests:
// a test binary that testscript runs as a command (kvgen, in a script)
// runs with the environment the script gave it, as a user's kvgen does.
func Main(m Runner) Runner {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	return mainRunner{m}
}

// setTestEnv is the environment Main promises the tests.
func setTestEnv() {
	userGoFlags = os.Getenv("GOFLAGS")
	for _, kv := range testenv.Static() {
		k, v, _ := strings.Cut(kv, "=")
		os.Setenv(k, v)
	}
	flags := "-trimpath"
	for _, f := range []string{"-ldflags=-w", "-buildvcs=false"} {
		if name, _, _ := strings.Cut(f, "="); !strings.Contains(userGoFlags, name) {
			flags += " " + f
		}
	}
	os.Setenv("GOFLAGS", strings.TrimSpace(userGoFlags+" "+flags))
}

// userGoFlags is GOFLAGS as the test binary found it, before Main added
// -trimpath.
var userGoFlags string

type mainRunner struct{ m Runner }

func (r mainRunner) Run() int {
	setTestEnv()
	code := r.m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.dir != "" {
		if err := os.RemoveAll(shared.dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = max(code, 1)
		}
	}
	return code
}

// SharedDir is a directory that lasts as long as the test binary: what
// its tests build once for all of them (and -count repetitions) goes
// there. It needs Main.
func SharedDir(t testing.TB) string {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.main {
		t.Fatal("kvgentest.SharedDir needs TestMain to run the tests through kvgentest.Main, which removes the directory")
	}
	if shared.dir == "" {
		dir, err := os.MkdirTemp("", "kvgentest-")
		if err != nil {
			t.Fatal(err)
		}
		shared.dir = dir
	}
	return shared.dir
}

var kvgen struct {
	sync.Mutex
	bin string
	err error
}

// KVGen is the kvgen command of this checkout, built once per test binary
// (in SharedDir, so it needs Main). A failed build fails every test that
// asks for it.
func KVGen(t testing.TB) string {
	t.Helper()
	dir := SharedDir(t)
	kvgen.Lock()
	defer kvgen.Unlock()
	if kvgen.bin == "" && kvgen.err == nil {
		bin := filepath.Join(dir, "kvgen")
		// Without the -trimpath Main adds, as go tool builds kvgen (it
		// takes no build flags, and ignores those in GOFLAGS), and from
		// the scripts' module cache (testenv.ToolEnv): kvgen's packages
		// and their dependencies are then compiled in one configuration,
		// the one testall compiles first and the scripts' go tool kvgen
		// builds, not in a second one as well.
		// Not stamped with this checkout's revision either: that runs git
		// status in it (Main says why not).
		env, err := testenv.ToolEnv(nil)
		var res Result
		if err == nil {
			res, err = run(Root(t), append(env, "GOFLAGS="+userGoFlags), BuildTimeout, "go", "build", "-buildvcs=false", "-o", bin, "./cmd/kvgen")
		}
		if err == nil && res.Code != 0 {
			err = fmt.Errorf("go build ./cmd/kvgen: exit %d\n%s", res.Code, res.Stderr)
		}
		kvgen.bin, kvgen.err = bin, err
	}
	if kvgen.err != nil {
		t.Fatal(kvgen.err)
	}
	return kvgen.bin
}

// Program builds the main package in dir into a temporary directory and
// returns the binary, named for dir. It builds with -trimpath, as kvgen
// build compiles, so that the two share the build cache's compiled
// packages, with -buildvcs=false, so that it runs no git status in this
// checkout (Main says why), and with testenv.Static's CGO_ENABLED=0.
func Program(t testing.TB, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(abs))
	res := Run(t, abs, testenv.Static(), BuildTimeout, "go", "build", "-trimpath", "-buildvcs=false", "-o", bin, ".")
	if res.Code != 0 {
		t.Fatalf("go build %s: exit %d\n%s", abs, res.Code, res.Stderr)
	}
	return bin
}

// Result is what a finished process left.
type Result struct {
	Stdout, Stderr string
	Code           int // its exit code
}

// Run runs name in dir (the test's working directory if "") with env added
// to the test's environment, and fails the test if it cannot start or
// does not exit within timeout. kvgen's cache is off unless env says
// otherwise: the user's cache is not the tests' to write.
func Run(t testing.TB, dir string, env []string, timeout time.Duration, name string, args ...string) Result {
	t.Helper()
	res, err := run(dir, env, timeout, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func run(dir string, env []string, timeout time.Duration, name string, args ...string) (Result, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "KVGENCACHE=off"), env...)
	// A child that keeps the output pipes open must not outlast the bound.
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	line := strings.Join(append([]string{name}, args...), " ")
	if ctx.Err() != nil {
		return Result{}, fmt.Errorf("%s: not done within %s\nstderr:\n%s", line, timeout, stderr.String())
	}
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		return Result{}, fmt.Errorf("%s: %w", line, err)
	}
	return Result{Stdout: stdout.String(), Stderr: stderr.String(), Code: cmd.ProcessState.ExitCode()}, nil
}
