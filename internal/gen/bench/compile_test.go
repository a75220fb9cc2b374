// The benchmarks time kvgen and the go command as users run them; under
// the race detector they would time the detector, so go test -race leaves
// them out.

//go:build !race

package bench_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// BenchmarkCompile measures what the compiler spends on the generated
// registry package of N entries, against a floor: a package with the same
// imports that only refers to each constructor once (var floor =
// []any{c00000.New, ...}), which no registry can compile faster than. Each
// iteration compiles both, one after the other, after a change that makes
// the go command compile them again; every other package comes from the
// build cache.
//
// The compiler alone is measured, through -toolexec: its wall time
// (compile-ns/op and floor-ns/op), the ratio of its processor time, user
// and system (cpu-ratio), and its peak resident memory (rss-MB,
// floor-rss-MB, rss-ratio). The connector packages are small ones, half
// of them returning a concrete type that the registry adapts, half
// kv.Connector, as in BenchmarkGenerate; the registry is generated
// by kvgen itself. The first run at N=10000 compiles the 10,000 packages
// into the build cache, which takes minutes.
func BenchmarkCompile(b *testing.B) {
	kvgen := kvgentest.KVGen(b)
	wrap := buildToolexec(b)
	for _, n := range []int{100, 1000, 10000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			mod := compileModuleAt(b, n)
			command(mod.dir, kvgen, "generate")(b)
			generated, err := os.ReadFile(mod.output)
			if err != nil {
				b.Fatal(err)
			}
			// A copy in a package of its own, which kvgen leaves alone.
			reg := mod.compile(wrap, "regcopy", string(generated))
			floor := mod.compile(wrap, "floor", mod.floor)
			alternate(b, reg, floor, "floor")
		})
	}
}

// compileModule is a module of n small connector packages, with a manifest
// listing them all and the floor package's source.
type compileModule struct {
	dir, path string
	output    string // the registry file kvgen writes
	floor     string // the floor package's source
}

func compileModuleAt(b *testing.B, n int) compileModule {
	b.Helper()
	// Short paths keep the manifest of 10,000 entries under 1 MiB.
	m := compileModule{dir: filepath.Join(kvgentest.SharedDir(b), fmt.Sprintf("compile%d", n)), path: fmt.Sprintf("example.com/kvc%d", n)}
	m.output = filepath.Join(m.dir, "reg", "connectors_gen.go")
	var manifest, imports, refs strings.Builder
	manifest.WriteString("version: 1\npackage: reg\noutput: reg/connectors_gen.go\nconnectors:\n")
	files := map[string]string{}
	for i := range n {
		pkg := fmt.Sprintf("c%05d", i)
		fmt.Fprintf(&manifest, "  - name: %s\n    import: %s/c/%s\n    constructor: New\n", pkg, m.path, pkg)
		fmt.Fprintf(&imports, "\t%q\n", m.path+"/c/"+pkg)
		fmt.Fprintf(&refs, "\t%s.New,\n", pkg)
		files[filepath.Join("c", pkg, "c.go")] = smallConnector(pkg, i%2 == 1)
	}
	m.floor = "package floor\n\nimport (\n" + imports.String() + "\n\t\"github.com/kvgen/kvgen/registry/kv\"\n)\n\n" +
		"var _ kv.Factory\n\nvar floor = []any{\n" + refs.String() + "}\n"
	files["connectors.yaml"] = manifest.String()
	writeModule(b, m.dir, m.path, files)
	return m
}

// smallConnector is a connector package that returns a concrete *Conn,
// which the registry adapts, or a kv.Connector.
func smallConnector(pkg string, concrete bool) string {
	result := "kv.Connector"
	if concrete {
		result = "*Conn"
	}
	return fmt.Sprintf(`package %s

import (
	"context"

	"github.com/kvgen/kvgen/registry/kv"
)

// Conn is connector %s; it serves both roles through the interfaces it
// embeds, which are nil: only its type matters here.
type Conn struct {
	kv.Scheduler
	kv.Worker
	role kv.Role
}

// Close releases nothing.
func (c *Conn) Close() error { return nil }

// New returns a connector for role.
func New(ctx context.Context, cfg kv.Config, role kv.Role) (%s, error) {
	return &Conn{role: role}, nil
}
`, pkg, pkg, result)
}

// compile returns a run of the compiler on the module's package dir: each
// run writes source with a line of its own (the time) appended, so that the go
// command compiles it again, and builds the package with the compiler
// under the -toolexec wrapper, which reports what the compiler took.
func (m compileModule) compile(wrap, dir, source string) timed {
	return func(b *testing.B) cost {
		b.Helper()
		writeFile(b, filepath.Join(m.dir, dir, dir+".go"), fmt.Sprintf("%s\n// run %d\n", source, time.Now().UnixNano()))
		report := filepath.Join(m.dir, "compile-"+dir+".txt")
		os.Remove(report)
		cmd := exec.Command("go", "build", "-toolexec="+wrap, "./"+dir)
		cmd.Dir = m.dir
		cmd.Env = append(os.Environ(), "KVBENCH_PKG="+m.path+"/"+dir, "KVBENCH_REPORT="+report)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out.Bytes())
		}
		data, err := os.ReadFile(report)
		if err != nil {
			b.Fatalf("the compiler did not run for %s: %v", dir, err)
		}
		f := strings.Fields(string(data))
		if len(f) != 3 {
			b.Fatalf("report %q", data)
		}
		var c cost
		wall, _ := strconv.ParseInt(f[0], 10, 64)
		cpu, _ := strconv.ParseInt(f[1], 10, 64)
		c.wall, c.cpu = time.Duration(wall), time.Duration(cpu)
		c.rss, _ = strconv.ParseInt(f[2], 10, 64)
		return c
	}
}

// toolexecSource runs a tool of the go command, and when it is the
// compiler compiling $KVBENCH_PKG, writes its wall time, processor time
// (nanoseconds) and peak resident memory (bytes) to $KVBENCH_REPORT.
const toolexecSource = `package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"time"
)

func main() {
	cmd := exec.Command(os.Args[1], os.Args[2:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	if err != nil {
		if x, ok := err.(*exec.ExitError); ok {
			os.Exit(x.ExitCode())
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	i := slices.Index(os.Args, "-p")
	name := filepath.Base(os.Args[1])
	if (name == "compile" || name == "compile.exe") && i > 0 && i+1 < len(os.Args) && os.Args[i+1] == os.Getenv("KVBENCH_PKG") {
		ps := cmd.ProcessState
		rss := ps.SysUsage().(*syscall.Rusage).Maxrss * 1024
		report := fmt.Sprintf("%d %d %d\n", wall.Nanoseconds(), (ps.UserTime() + ps.SystemTime()).Nanoseconds(), rss)
		if err := os.WriteFile(os.Getenv("KVBENCH_REPORT"), []byte(report), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
`

// buildToolexec builds the -toolexec wrapper once per run.
func buildToolexec(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(kvgentest.SharedDir(b), "toolexec")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := filepath.Join(kvgentest.SharedDir(b), "toolexec-src", "main.go")
	writeFile(b, src, toolexecSource)
	command(filepath.Dir(src), "go", "build", "-o", bin, "main.go")(b)
	return bin
}
