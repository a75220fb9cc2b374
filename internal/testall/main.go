// Command testall runs the tests of every module in this repository, each
// module's whether or not an earlier one failed, and exits non-zero if any
// failed. It prints what go test prints without -v: each package's result
// line, and the output of the tests that failed; then a line per module and
// a closing count.
//
//	go run ./internal/testall [-download] [go test flags]
//
// The flags are go test's, given to every module after -race,
// -timeout=300s, -vet=off and -ldflags=-w (-short for the edit loop; a
// later flag wins). cmd/kvgen's tests run alone, before the rest of the
// root module's.
//
// First it downloads what the tests need, what each module's go mod
// download all fetches (testenv.DownloadAll): the scripts' module proxies
// serve a published kvgen's dependencies from those downloads. The tests
// then run with GOPROXY=off, so none reaches the network. With -download
// it stops there: CI downloads so, then runs it again with GOPROXY=off.
// Before the tests, it compiles what their go commands build (prebuilds).
//
// With CI=true in the environment a skipped test fails the run too, unless
// its reason is its platform's (a program or feature this system lacks) or
// the conformance suite's (a connector that does not serve what a check
// needs): CI has everything the tests need, so a skip there would hide a
// test that did not run.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/kvgen/kvgen/internal/testenv"
)

// modules are the repository's modules, by directory from its root; the
// root's go.mod does not reach into the others.
var modules = []string{".", "examples/kvserver", "examples/gateway", "examples/scheduler", "examples/external/redis", "examples/external/kvevents"}

// allowedSkip matches the reasons a test may skip for in CI (skipReason):
// what this platform lacks, and checks of the conformance suite that do
// not apply to the connector under test.
var allowedSkip = regexp.MustCompile(
	// testscript's conditions on the system: [!unix], [!exec:sh] …
	`\[!(unix|exec:[\w.-]+)\] skip|` +
		// Go tests that need what one system has.
		`PWD is a POSIX convention|symbolic links need a privilege on Windows|` +
		`not a 64-bit little-endian ELF file|` +
		// The conformance suite: a check for a role or an interface the
		// connector does not have.
		`the connector (does not serve|serves one role)|` +
		`the worker (does not implement|is not a )|Options\.Damage is not set`)

func main() {
	root, err := testenv.Root()
	if err != nil {
		fmt.Fprintln(os.Stderr, "testall:", err)
		os.Exit(2)
	}
	ci := os.Getenv("CI") == "true"
	var testFlags []string
	downloadOnly := false
	for _, arg := range os.Args[1:] {
		if arg == "-download" || arg == "--download" {
			downloadOnly = true
			continue
		}
		testFlags = append(testFlags, arg)
	}
	if err := download(root); err != nil {
		fmt.Fprintln(os.Stderr, "testall: downloading what the tests need:", err)
		os.Exit(1)
	}
	if downloadOnly {
		return
	}
	start := time.Now()
	if err := prebuild(root); err != nil {
		fmt.Fprintln(os.Stderr, "testall: compiling what the tests build:", err)
		os.Exit(1)
	}
	prebuilt := time.Since(start)
	// go vet runs on its own, for three systems, in CI: not again here.
	// The test binaries leave out DWARF (-ldflags=-w), which a race report
	// or a panic does not read, and which is a third of a race-built test
	// binary's link, unless GOFLAGS sets -ldflags of its own.
	args := []string{"test", "-json", "-race", "-timeout=300s", "-vet=off"}
	if !strings.Contains(os.Getenv("GOFLAGS"), "-ldflags") {
		args = append(args, "-ldflags=-w")
	}
	args = append(args, testFlags...)

	var total tally
	failed := false
	var lines []string
	for _, m := range modules {
		start := time.Now()
		var t tally
		err := runModule(filepath.Join(root, m), m, args, ci, &t)
		status := "ok"
		if err != nil || t.failed > 0 || t.badSkips > 0 {
			status, failed = "FAIL", true
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "testall: %s: %v\n", m, err)
		}
		lines = append(lines, fmt.Sprintf("%-4s %-26s %d passed, %d failed, %d skipped (%.0fs)", status, m, t.passed, t.failed, t.skipped, time.Since(start).Seconds()))
		total.add(t)
	}
	fmt.Println()
	fmt.Printf("compiled what the tests build first, in %.0fs\n", prebuilt.Seconds())
	for _, l := range lines {
		fmt.Println(l)
	}
	if total.badSkips > 0 {
		fmt.Printf("%d tests skipped in CI for a reason that is not their platform's; see SKIP above\n", total.badSkips)
	}
	fmt.Printf("%d passed, %d failed, %d skipped\n", total.passed, total.failed, total.skipped)
	if failed {
		os.Exit(1)
	}
}

// download fills the module cache with what the tests need: what each
// module's go mod download all fetches, without writing go.sum.
func download(root string) error {
	for _, m := range modules {
		if err := testenv.DownloadAll(filepath.Join(root, m), nil); err != nil {
			return err
		}
	}
	return nil
}

// prebuilds are what the tests' go commands compile, by module directory,
// each in a build configuration of its own: -trimpath (kvgentest.Main puts
// it in the tests' GOFLAGS, and kvgen build adds it) for kvgen's runtime,
// the connectors and the example server; without it, kvgen as go tool
// builds it (go tool takes no build flags, and ignores those in GOFLAGS),
// from the scripts' module cache, as the scripts and kvgentest.KVGen
// build it, to share it; the static binaries images
// hold; the other platforms the image and cross-compiling tests build
// for; and the Redis connector, which the datacenter deployment adds (its
// image is for linux/amd64 alone, so go-redis is not compiled for arm64). All
// with testenv.Static's environment, as the tests' go commands, so that
// on linux/amd64 the images' configuration is the first one (the
// CGO_ENABLED=0 lines are for other hosts). Compiled here, once, each is
// compiled by one go command, not by several scripts at the same time
// each its own copy on a cold build cache, and outside the tests'
// timeout.
var prebuilds = []struct {
	dir  string
	env  []string
	args []string
	tool bool // from the scripts' module cache (testenv.ToolEnv)
}{
	{".", nil, []string{"-trimpath", "./registry/...", "./examples/..."}, false},
	{".", nil, []string{"./cmd/kvgen"}, true},
	{"examples/kvserver", nil, []string{"-trimpath", "./..."}, false},
	{"examples/kvserver", nil, []string{"tool"}, true},
	{"examples/kvserver", []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}, []string{"-trimpath", "."}, false},
	{"examples/kvserver", []string{"GOOS=linux", "GOARCH=arm64"}, []string{"-trimpath", "."}, false},
	{"examples/external/redis", nil, []string{"-trimpath", "."}, false},
	{"examples/external/redis", []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64"}, []string{"-trimpath", "."}, false},
	// What build_targets' host and the warm path's GOOS test link for
	// Windows: the runtime and the memory connector, not the conformance
	// suite, which would bring the testing package's dependencies.
	{".", []string{"GOOS=windows", "GOARCH=amd64"}, []string{"-trimpath", "./registry", "./registry/kv", "./examples/connectors/memory"}, false},
}

// prebuild compiles the prebuilds into the build cache. go list -export
// compiles a package and its dependencies as go build does, under the same
// cache keys, without linking a program nobody runs: on a warm cache it
// only checks. -buildvcs=false: stamping a program runs git status in this
// checkout, which rewrites .git, an input of tests that read the checkout,
// and go test would then run them again instead of replaying their result.
func prebuild(root string) error {
	base := append(append(os.Environ(), "GOPROXY=off"), testenv.Static()...)
	tool, err := testenv.ToolEnv(base)
	if err != nil {
		return err
	}
	for _, p := range prebuilds {
		cmd := exec.Command("go", append([]string{"list", "-export", "-buildvcs=false", "-f", "{{if .Error}}{{.Error}}{{end}}"}, p.args...)...)
		cmd.Dir = filepath.Join(root, p.dir)
		cmd.Env = append(slices.Clip(base), p.env...)
		if p.tool {
			cmd.Env = append(cmd.Env, tool...)
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %s %s: %v\n%s", p.dir, strings.Join(p.env, " "), strings.Join(cmd.Args, " "), err, out)
		}
	}
	return nil
}

// tally counts a run's tests, subtests included.
type tally struct{ passed, failed, skipped, badSkips int }

func (t *tally) add(o tally) {
	t.passed += o.passed
	t.failed += o.failed
	t.skipped += o.skipped
	t.badSkips += o.badSkips
}

// event is one line of go test -json: a test event or a build event.
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build events
}

// alone are the packages whose tests run before the rest of their
// module's, in a go test of their own, by module directory: cmd/kvgen's
// scripts run go commands two at a time, and beside another package's
// tests they took up to 280 s of their 300 on a slow machine's two cores,
// where alone they take about 170.
var alone = map[string]string{".": "github.com/kvgen/kvgen/cmd/kvgen"}

// runModule runs go test in dir, the package alone[module] by itself
// before the others, and prints what go test would print without -json,
// counting the tests into t.
func runModule(dir, module string, args []string, ci bool, t *tally) error {
	first, ok := alone[module]
	if !ok {
		return runTests(dir, slices.Concat(args, []string{"./..."}), ci, t)
	}
	rest, err := packagesBut(dir, first)
	if err != nil {
		return err
	}
	if err := runTests(dir, slices.Concat(args, []string{first}), ci, t); err != nil {
		return err
	}
	return runTests(dir, slices.Concat(args, rest), ci, t)
}

// packagesBut lists the packages of the module in dir that ./... gives go
// test -race, by import path, but except: those with files for this
// system and -race, tests' included (a package whose files are all for
// another build is an error when named, where ./... passes over it).
// -buildvcs=false: for a main package go list runs git status in the
// checkout, which rewrites .git, an input of tests that read the checkout,
// and go test would then run them again instead of replaying their result.
func packagesBut(dir, except string) ([]string, error) {
	cmd := exec.Command("go", "list", "-race", "-buildvcs=false", "-e", "-f", "{{if or .GoFiles .CgoFiles .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("listing the packages of %s: %v", dir, err)
	}
	pkgs := strings.Fields(string(out))
	return slices.DeleteFunc(pkgs, func(p string) bool { return p == except }), nil
}

// runTests runs go test with args in dir and prints what go test would
// print without -json, counting the tests into t.
func runTests(dir string, args []string, ci bool, t *tally) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	// Only what the download step fetched, and go.sum verified: no module
	// proxy and no checksum database.
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOSUMDB=off")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	perr := report(os.Stdout, out, ci, t)
	if perr != nil {
		io.Copy(io.Discard, out) // so that go test is not left blocked writing
	}
	werr := cmd.Wait()
	if perr != nil {
		return perr
	}
	if werr != nil && t.failed == 0 {
		// go test failed without a failing test: a build or setup failure,
		// whose output is printed already.
		t.failed++
	}
	return nil
}

// report reads go test -json from r and prints to w each package's lines
// and the output of each failed or wrongly skipped test.
func report(w io.Writer, r io.Reader, ci bool, t *tally) error {
	// What each running test has printed, kept until it ends.
	held := map[[2]string]*strings.Builder{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not JSON: what go test printed of its own.
			fmt.Fprintln(w, sc.Text())
			continue
		}
		if e.ImportPath != "" && e.Action == "build-output" {
			fmt.Fprint(w, e.Output)
			continue
		}
		key := [2]string{e.Package, e.Test}
		switch {
		case e.Action == "output" && e.Test == "":
			// The package's own lines: ok, FAIL, panics and its result.
			if !strings.HasPrefix(e.Output, "=== ") && !strings.HasPrefix(e.Output, "PASS\n") {
				fmt.Fprint(w, e.Output)
			}
		case e.Action == "output":
			b := held[key]
			if b == nil {
				b = new(strings.Builder)
				held[key] = b
			}
			b.WriteString(e.Output)
		case e.Test == "":
			// pass, fail or skip of a whole package: its line came as output.
		case e.Action == "pass":
			t.passed++
			delete(held, key)
		case e.Action == "fail":
			t.failed++
			if b := held[key]; b != nil {
				fmt.Fprint(w, withoutProgress(b.String()))
			}
			delete(held, key)
		case e.Action == "skip":
			t.skipped++
			out := ""
			if b := held[key]; b != nil {
				out = b.String()
			}
			delete(held, key)
			if ci && !allowedSkip.MatchString(skipReason(out)) {
				t.badSkips++
				fmt.Fprintf(w, "SKIP in CI: %s %s\n%s", e.Package, e.Test, withoutProgress(out))
			}
		}
	}
	return sc.Err()
}

// scriptSkip is a testscript line that skips, as its log shows it.
var scriptSkip = regexp.MustCompile(`^\s*> (\[[^]]*\] )*skip\b`)

// skipReason is the line of a skipped test's output that says why: for a
// testscript script, the last skip line its log shows (testscript logs
// each line it reaches before it checks the line's condition, so earlier
// skip lines whose condition did not hold are there too); for a Go test,
// the last line it logged.
func skipReason(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if scriptSkip.MatchString(lines[i]) {
			return lines[i]
		}
	}
	for i := len(lines) - 1; i >= 0; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" && !strings.HasPrefix(l, "--- SKIP") && !strings.HasPrefix(l, "=== ") {
			return l
		}
	}
	return ""
}

// withoutProgress drops go test -json's === RUN, PAUSE and CONT lines,
// which go test prints only with -v.
func withoutProgress(out string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if !strings.HasPrefix(line, "=== ") {
			b.WriteString(line)
		}
	}
	return b.String()
}
