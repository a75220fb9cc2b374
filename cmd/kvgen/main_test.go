package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/goproxytest"
	"github.com/rogpeppe/go-internal/lockedfile"
	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"

	"github.com/kvgen/kvgen/internal/kvgentest"
	"github.com/kvgen/kvgen/internal/testenv"
)

var update = flag.Bool("update", false, "rewrite the expectations in testdata/script")

func TestMain(m *testing.M) {
	testscript.Main(kvgentest.Main(m), map[string]func(){"kvgen": main})
}

// TestScripts runs the txtar scripts under testdata/script. Each runs in a
// module, example.com/script, that requires this checkout of kvgen; $ROOT is
// the checkout. The modules under testdata/mod are published through a
// local module proxy ($TESTPROXY), tried before the user module cache's
// downloads ($MODCACHE_PROXY), and nothing else: no script reaches the
// network, and none consults a checksum database. Those under
// testdata/privatemod are served by another, $PRIVATEPROXY, which no
// script's GOPROXY names unless it says so. $STABLE is an empty directory
// of the script's own at the same path on every run (stableDir).
func TestScripts(t *testing.T) {
	root := kvgentest.Root(t)
	// Each script's module, example.com/script.
	module := map[string]string{"go.mod": kvgentest.GoMod(t, "example.com/script"), "go.sum": kvgentest.GoSum(t)}
	user := goEnvVars(t, "GOCACHE", "GOMODCACHE", "GOROOT", "GOPROXY")
	proxy := goproxytest.NewTestServer(t, "testdata/mod", "")
	// A team's private module proxy: it alone serves the modules under
	// testdata/privatemod, as $PRIVATEPROXY, which scripts put in GOPROXY.
	private := goproxytest.NewTestServer(t, "testdata/privatemod", "")
	published, commit, unpublished := publish(t, root)
	// The warm-up's go mod tidy, and a published kvgen's scripts, take
	// kvgen's whole build list from the user's module cache's downloads,
	// of which building kvgen's tests fetches only a part. -short too:
	// without them the warm-up fails on the first module missing.
	if why := completeModCache(root, user); why != "" {
		t.Fatalf("%s\nFetch them once, with network access: go run ./internal/testall -download", why)
	}
	if unpublished != "" && os.Getenv("CI") == "true" {
		// CI runs from a git checkout; a script skipped there would pass
		// unseen.
		t.Fatal(unpublished)
	}
	// The scripts' own module cache, fed only by the test proxies and the
	// user's module cache's downloads, never by the network: a module a
	// script needs and neither has fails, naming it.
	modcacheProxy := downloadsProxy(t, filepath.Join(user["GOMODCACHE"], "cache", "download"))
	goEnv := scriptGoEnv(t, user, proxy.URL+","+modcacheProxy)
	stable := filepath.Join(filepath.Dir(goEnv["GOPATH"]), "stable")
	warmBuildCache(t, root, goEnv, module)
	// The scripts share one cache of their own: HOME is /no-home in
	// a script, and the user's cache directory is not the tests' to write.
	cacheDir := t.TempDir()
	testscript.Run(t, testscript.Params{
		Dir:           "testdata/script",
		UpdateScripts: *update,
		Setup: func(env *testscript.Env) error {
			env.Setenv("ROOT", root)
			dir, err := stableDir(stable, env.WorkDir)
			if err != nil {
				return err
			}
			env.Defer(func() {
				if err := removeModCacheDir(dir); err != nil {
					env.T().Log(err)
				}
			})
			env.Setenv("STABLE", dir)
			env.Setenv("KVGENCACHE", cacheDir)
			for k, v := range goEnv {
				env.Setenv(k, v)
			}
			env.Setenv("PRIVATEPROXY", private.URL)
			env.Setenv("TESTPROXY", proxy.URL)
			// kvgen in a script is this test binary; built with -race, it
			// sleeps a second on exit for other goroutines' reports, and
			// the scripts run it some two hundred times.
			env.Setenv("GORACE", strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			// What a published kvgen needs: this checkout's HEAD as
			// github.com/kvgen/kvgen v0.1.0, and its dependencies from the
			// module cache's downloads. Without it, [!published] scripts
			// skip, saying why.
			env.Setenv("KVGEN_PUBLISHED_PROXY", published)
			env.Setenv("KVGEN_PUBLISHED_COMMIT", commit)
			env.Setenv("KVGEN_UNPUBLISHED", unpublished)
			env.Setenv("MODCACHE_PROXY", modcacheProxy)
			env.Setenv("PATH", filepath.Join(goEnv["GOROOT"], "bin")+string(os.PathListSeparator)+env.Getenv("PATH"))
			for name, content := range module {
				if err := os.WriteFile(filepath.Join(env.WorkDir, name), []byte(content), 0o644); err != nil {
					return err
				}
			}
			return nil
		},
		Condition: func(cond string) (bool, error) {
			if cond == "published" {
				return unpublished == "", nil
			}
			if cond == "registry" {
				return hasRegistry(), nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exitcode": exitCode,
			"age":      age,
			"aged":     aged,
			"repo":     copyRepo,
			"registry": startRegistry,
		},
	})
}

// scriptGoEnv is the go environment every script starts with: the user's
// Go and build cache, and a GOPATH of the tests' own, whose module cache is
// fed by goproxy alone. It lies at a fixed path (in the user's cache
// directory), so that a second run extracts no module again, and a build
// outside -trimpath (a script may set GOFLAGS) finds its packages compiled:
// their cache keys hold their directories. What the test proxies serve is
// removed from it first, so that no script passes on a module a proxy no
// longer has. The test holds a lock on it while it runs.
func scriptGoEnv(t *testing.T, user map[string]string, goproxy string) map[string]string {
	gopath, err := testenv.ScriptGoPath()
	if err != nil {
		t.Logf("the scripts' module cache is a new one, for this run only: %v", err)
		base := t.TempDir()
		// Registered after TempDir's, so run before it: the go command
		// makes a module cache read-only.
		t.Cleanup(func() {
			if err := removeModCacheDir(base); err != nil {
				t.Error(err)
			}
		})
		gopath = filepath.Join(base, "gopath")
	}
	if err := os.MkdirAll(gopath, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("the scripts' module cache: %s (waiting for any other run of these tests to finish with it)", gopath)
	unlock, err := lockedfile.MutexAt(filepath.Join(gopath, "lock")).Lock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(unlock)
	modcache := filepath.Join(gopath, "pkg", "mod")
	for _, prefix := range servedPrefixes(t) {
		for _, dir := range []string{filepath.Join(modcache, prefix), filepath.Join(modcache, "cache", "download", prefix)} {
			if err := removeModCacheDir(dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	return map[string]string{
		"GOROOT":     user["GOROOT"],
		"GOCACHE":    user["GOCACHE"],
		"GOPATH":     gopath,
		"GOMODCACHE": modcache,
		"GOPROXY":    goproxy,
		// Nothing a script fetches is looked up in a checksum database:
		// the test proxies' modules are in none, and the rest are
		// checked against go.sum.
		"GOSUMDB": "off",
		// What the scripts compile, kvgen build compiles with -trimpath:
		// the rest does too, so that both share compiled packages, and a
		// copy of this repository at a new path compiles nothing again.
		// What they link needs no DWARF, and what they build inside this
		// checkout must not run git status there (kvgentest.Main says
		// why). kvgen in a script, this test binary, runs with this
		// GOFLAGS and no other, as a user's kvgen runs with theirs.
		"GOFLAGS": "-trimpath -ldflags=-w -buildvcs=false",
		// As the images kvgen build makes, which are static (testenv.Static
		// says why; the scripts' GOFLAGS asks for no sanitizer).
		"CGO_ENABLED": "0",
	}
}

// stableDir makes $STABLE, an empty directory of the script whose work
// directory is workDir, at the same path on every run (under the scripts'
// module cache, and so under its lock). The go command builds what go tool
// runs without -trimpath, whatever GOFLAGS says, so the build cache keys of
// a tool built from under $WORK (a copy of this repository, a module cache
// of a script's own) hold a directory that is new on every run, and nothing
// compiled for it is found again; under $STABLE it is. A script leaves
// nothing there: the directory is removed before it starts and after it
// ends.
func stableDir(root, workDir string) (string, error) {
	dir := filepath.Join(root, strings.TrimPrefix(filepath.Base(workDir), "script-"))
	if err := removeModCacheDir(dir); err != nil {
		return "", err
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// downloadsProxy serves a module cache's downloads (its cache/download
// directory) as a module proxy, and returns its URL, as a file:// GOPROXY
// would, but for the modules the test proxies serve (servedPrefixes): those
// it does not have. A module cache that earlier runs of these tests
// filled may hold versions a test proxy no longer serves, and the go
// command would go on to find them here.
func downloadsProxy(t *testing.T, dir string) string {
	prefixes := servedPrefixes(t)
	files := http.FileServerFS(os.DirFS(dir))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, p := range prefixes {
			if path := strings.TrimPrefix(r.URL.Path, "/"); path == p || strings.HasPrefix(path, p+"/") {
				http.NotFound(w, r)
				return
			}
		}
		files.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// servedPrefixes are the first path elements of the modules the test
// proxies serve, and publish's github.com/kvgen.
func servedPrefixes(t *testing.T) []string {
	prefixes := []string{"github.com/kvgen"}
	for _, dir := range []string{"testdata/mod", "testdata/privatemod"} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			host, _, _ := strings.Cut(e.Name(), "_")
			if !slices.Contains(prefixes, host) {
				prefixes = append(prefixes, host)
			}
		}
	}
	return prefixes
}

// removeModCacheDir removes dir from a module cache, whose directories the
// go command makes read-only.
func removeModCacheDir(dir string) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(path, 0o755)
		}
		return err
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(dir)
}

// publish serves github.com/kvgen/kvgen v0.1.0 as a tag at HEAD would make
// it, and returns the GOPROXY URL of a module proxy directory that holds it
// and nothing else of this repository. zip.CreateFromVCS zips what git
// archive does: committed files, without ignored ones or nested modules, so
// uncommitted changes are not what is served. A checkout that is not a git
// one (a source tarball, say) cannot be zipped so: publish returns why.
// It returns the commit too: the module cache a script fills with v0.1.0
// lies at a path named for it, since the go command indexes a module
// cache's modules in the build cache by their directory and takes a
// version's content never to change, which this v0.1.0's does from commit
// to commit.
func publish(t *testing.T, root string) (proxy, commit, why string) {
	if _, err := exec.LookPath("git"); err != nil {
		return "", "", "kvgen is not published: git is not on PATH"
	}
	// A tree unpacked inside another repository's is not a checkout.
	top, err := git(root, "rev-parse", "--show-toplevel")
	if err != nil || !sameDir(top, root) {
		return "", "", "kvgen is not published: this checkout is not a git work tree of its own"
	}
	head, err := git(root, "show", "-s", "--no-show-signature", "--format=%H %ct", "HEAD")
	if err != nil {
		return "", "", "kvgen is not published: this checkout has no commit"
	}
	hash, secs, _ := strings.Cut(head, " ")
	unix, err := strconv.ParseInt(secs, 10, 64)
	if err != nil {
		t.Fatalf("commit time %q: %v", secs, err)
	}

	m := module.Version{Path: "github.com/kvgen/kvgen", Version: "v0.1.0"}
	var zipped bytes.Buffer
	// It fails too if the zip outgrows the module zip limits.
	err = modzip.CreateFromVCS(&zipped, m, root, hash, "")
	if _, ok := errors.AsType[*modzip.UnrecognizedVCSError](err); ok {
		// CreateFromVCS wants the git directory at root/.git, which a
		// linked worktree's is not: zip from a clone sharing its objects.
		clone := filepath.Join(t.TempDir(), "kvgen")
		if _, err := git(root, "clone", "--quiet", "--shared", "--no-checkout", root, clone); err != nil {
			t.Fatal(err)
		}
		zipped.Reset()
		err = modzip.CreateFromVCS(&zipped, m, clone, hash, "")
	}
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := fileInZip(zipped.Bytes(), m.Path+"@"+m.Version+"/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Unix(unix, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}

	// The proxy protocol's files, $GOPROXY/<escaped path>/@v/...
	dir := t.TempDir()
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(dir, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"list":              []byte(m.Version + "\n"),
		m.Version + ".info": info,
		m.Version + ".mod":  gomod,
		m.Version + ".zip":  zipped.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return "file://" + filepath.ToSlash(dir), hash, ""
}

// git runs git in dir and returns its output, trimmed.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("git %s: %v\n%s", strings.Join(args, " "), err, ee.Stderr)
		}
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// sameDir reports whether a and b name one directory, whatever symlinks
// either path goes through.
func sameDir(a, b string) bool {
	ai, err := os.Stat(a)
	if err != nil {
		return false
	}
	bi, err := os.Stat(b)
	return err == nil && os.SameFile(ai, bi)
}

// fileInZip returns the contents of the named file in a zip archive.
func fileInZip(archive []byte, name string) ([]byte, error) {
	r, err := zip.NewReader(bytes.NewReader(archive), int64(len(archive)))
	if err != nil {
		return nil, err
	}
	f, err := r.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}

// warmBuildCache compiles, once, what the scripts' go commands compile
// again and again: kvgen's runtime packages, the example connectors, the
// conformance suite and their dependencies, without -race, into the build
// cache the scripts share; and kvgen as go tool builds it in a script's
// module, outside -trimpath (go tool ignores GOFLAGS), for the scripts
// that run go tool kvgen; not with -trimpath, as no script compiles it so
// (kvgen in a script is this test binary, or go tool's). The scripts run
// in parallel, so on a cold cache, or after an edit to kvgen, each would
// compile all of it at the same time as the others. The environment is the
// scripts': -trimpath, no go env file. go list -export compiles as go
// build does, without linking kvgen, and -buildvcs=false leaves this
// checkout's .git as it was (kvgentest.Main says why).
func warmBuildCache(t *testing.T, root string, goEnv map[string]string, module map[string]string) {
	cmd := goCommand(root, goEnv, "list", "-export", "-buildvcs=false", "-f", "{{if .Error}}{{.Error}}{{end}}", "./registry/...", "./examples/connectors/...")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go list -export: %v\n%s", err, out)
	}
	dir := t.TempDir()
	for name, content := range module {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"mod", "edit", "-tool=" + kvgentest.Path + "/cmd/kvgen"}, {"mod", "tidy"}, {"tool", "kvgen", "version"}} {
		if out, err := goCommand(dir, goEnv, args...).CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// completeModCache fills in the module cache's downloads, which stand in
// for the proxy a published kvgen's dependencies come from, with what
// go mod download all fetches (testenv.DownloadAll): building kvgen
// fetches less, no zip of a module it builds no package of. It returns why,
// if it could not.
func completeModCache(root string, goEnv map[string]string) (why string) {
	if err := testenv.DownloadAll(root, goCommand(root, goEnv).Env); err != nil {
		return "the module cache lacks modules of kvgen's build list: " + err.Error()
	}
	return ""
}

// goCommand is a go command in dir in the environment goEnv adds to: no
// GOFLAGS unless it says, no go env file.
func goCommand(dir string, goEnv map[string]string, args ...string) *exec.Cmd {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=", "GOENV=off")
	for k, v := range goEnv {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
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
