package main

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/goproxytest"
	"github.com/rogpeppe/go-internal/testscript"
)

var update = flag.Bool("update", false, "rewrite the expectations in testdata/script")

func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){"kvgen": main})
}

// TestScripts runs the txtar scripts under testdata/script. Each runs in a
// module, example.com/script, that requires this checkout of kvgen; $ROOT is
// the checkout. The modules under testdata/mod are published through a
// local module proxy, tried before the usual one; example.com modules are
// not in the checksum database.
func TestScripts(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	goEnv := goEnvVars(t, "GOCACHE", "GOMODCACHE", "GOPATH", "GOROOT", "GOPROXY")
	proxy := goproxytest.NewTestServer(t, "testdata/mod", "")
	published := goproxytest.NewTestServer(t, publish(t, root), "")
	warmBuildCache(t, root, goEnv)
	// The scripts share one check cache of their own: HOME is /no-home in
	// a script, and the user's cache directory is not the tests' to write.
	checkCache := t.TempDir()
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv("ROOT", root)
			env.Setenv("KVGENCACHE", checkCache)
			for k, v := range goEnv {
				env.Setenv(k, v)
			}
			env.Setenv("GOPROXY", proxy.URL+","+goEnv["GOPROXY"])
			env.Setenv("GONOSUMDB", "example.com")
			// kvgen in a script is this test binary; built with -race, it
			// sleeps a second on exit for other goroutines' reports, and
			// the scripts run it some two hundred times.
			env.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			// What a published kvgen needs: this checkout as
			// github.com/kvgen/kvgen v0.1.0, and its dependencies from the
			// module cache's downloads.
			env.Setenv("KVGEN_PUBLISHED_PROXY", published.URL)
			env.Setenv("MODCACHE_PROXY", "file://"+filepath.ToSlash(filepath.Join(goEnv["GOMODCACHE"], "cache", "download")))
			env.Setenv("PATH", filepath.Join(goEnv["GOROOT"], "bin")+string(os.PathListSeparator)+env.Getenv("PATH"))
			gomod := "module example.com/script\n\ngo 1.26.0\n\nrequire github.com/kvgen/kvgen v0.0.0\n\nreplace github.com/kvgen/kvgen => " + root + "\n"
			if err := os.WriteFile(filepath.Join(env.WorkDir, "go.mod"), []byte(gomod), 0o644); err != nil {
				return err
			}
			sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
			if err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(env.WorkDir, "go.sum"), sum, 0o644)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": exitCode,
			"age":      age,
			"aged":     aged,
			"repo":     copyRepo,
		},
	})
}

// publish lays out this checkout as the files of module version
// github.com/kvgen/kvgen v0.1.0, for goproxytest to serve, and returns the
// directory that holds it. Like a module zip it leaves out nested modules.
func publish(t *testing.T, root string) string {
	dir := t.TempDir()
	to := filepath.Join(dir, "github.com_kvgen_kvgen_v0.1.0")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == "." {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// warmBuildCache compiles, once, what the scripts' go commands compile
// again and again: kvgen's runtime packages, the example connectors, the
// conformance suite, kvgen itself and their dependencies, without -race,
// into the build cache the scripts share. The scripts run in parallel, so
// on a cold cache each would compile all of it at the same time as the
// others. The environment is the scripts': no GOFLAGS, no go env file.
func warmBuildCache(t *testing.T, root string, goEnv map[string]string) {
	cmd := exec.Command("go", "build", "./registry/...", "./examples/connectors/...", "./cmd/kvgen")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOENV=off")
	for k, v := range goEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
}

// exitCode runs `exitcode N command args...` and fails unless the command
// exits with status N; its output can then be checked with stdout/stderr.
func exitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode N command [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exitcode: %v", err)
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exitcode: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", strings.Join(args[1:], " "), got, want)
	}
}

// longAgo is the modification time `age` gives a file.
var longAgo = time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC)

// age FILE sets the file's modification time to long ago, so that `aged`
// can tell whether anything wrote it since, however coarse the clock.
func age(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: age FILE")
	}
	ts.Check(os.Chtimes(ts.MkAbs(args[0]), longAgo, longAgo))
}

// aged FILE passes if the file still has the time `age` gave it.
func aged(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: [!] aged FILE")
	}
	fi, err := os.Stat(ts.MkAbs(args[0]))
	ts.Check(err)
	if untouched := fi.ModTime().Equal(longAgo); untouched == neg {
		ts.Fatalf("%s modified at %s; untouched: %v, want %v", args[0], fi.ModTime(), untouched, !neg)
	}
}

func goEnvVars(t *testing.T, names ...string) map[string]string {
	out, err := exec.Command("go", append([]string{"env"}, names...)...).Output()
	if err != nil {
		t.Fatal(err)
	}
	vals := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	m := map[string]string{}
	for i, n := range names {
		m[n] = vals[i]
	}
	return m
}
