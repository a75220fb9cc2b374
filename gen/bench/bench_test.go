// Package bench_test measures `kvgen generate` against the go command it
// cannot be faster than: `go list -deps=false -export` of the same packages,
// which every run of kvgen pays for.
//
// Run it with:
//
//	go test -run '^$' -bench . -benchtime 5x -count 6 ./gen/bench | tee gen.bench
//	benchstat gen.bench
//	benchstat -filter /N:400 -col /names gen.bench
package bench_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"text/template"
	"time"
)

// workDir holds the kvgen binary and the synthesised modules; it lives for
// the whole run so that -count repetitions reuse one warm build cache.
var workDir string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "kvgen-bench-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	workDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// BenchmarkGenerate times a `kvgen generate` run, built as a binary, on
// modules of N connector packages, alternating each run with `go list
// -deps=false -export` of the same packages so that both see the same
// machine state. It reports:
//
//   - ns/op: one kvgen generate run, writing the registry file each time
//   - golist-ns/op: one go list run
//   - ratio: kvgen's total time over go list's
//
// names=same gives every package the name connector (their paths differ),
// which makes kvgen alias every import; names=distinct gives each its own.
func BenchmarkGenerate(b *testing.B) {
	kvgen := buildKvgen(b)
	cases := []struct {
		n    int
		same bool
	}{{1, false}, {10, false}, {100, false}, {400, false}, {400, true}}
	for _, c := range cases {
		b.Run(fmt.Sprintf("N=%d/names=%s", c.n, namesLabel(c.same)), func(b *testing.B) {
			mod := connectorModule(b, c.n, c.same)
			gen := mod.generate(kvgen)
			list := command(mod.dir, "go", append([]string{"list", "-deps=false", "-export"}, mod.paths...)...)
			// Warm the build cache and the page cache for both commands.
			list(b)
			gen(b)
			var genTime, listTime time.Duration
			for b.Loop() {
				listTime += list(b)
				genTime += gen(b)
			}
			report(b, genTime, listTime, "golist-ns/op", "ratio")
		})
	}
}

// BenchmarkSameName compares kvgen generate on 400 packages all named
// connector with 400 packages of distinct names, alternating the two. It
// reports ns/op for the same-name module, distinct-ns/op, and their ratio
// as same/distinct.
func BenchmarkSameName(b *testing.B) {
	kvgen := buildKvgen(b)
	const n = 400
	b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
		same := connectorModule(b, n, true).generate(kvgen)
		distinct := connectorModule(b, n, false).generate(kvgen)
		same(b)
		distinct(b)
		var sameTime, distinctTime time.Duration
		for b.Loop() {
			distinctTime += distinct(b)
			sameTime += same(b)
		}
		report(b, sameTime, distinctTime, "distinct-ns/op", "same/distinct")
	})
}

// report sets ns/op to the measured command's time per run and adds the
// reference command's time and the ratio of the two.
func report(b *testing.B, measured, reference time.Duration, refUnit, ratioUnit string) {
	n := float64(b.N)
	b.ReportMetric(float64(measured.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(reference.Nanoseconds())/n, refUnit)
	b.ReportMetric(measured.Seconds()/reference.Seconds(), ratioUnit)
}

func namesLabel(same bool) string {
	if same {
		return "same"
	}
	return "distinct"
}

// buildKvgen builds the kvgen command once per run.
func buildKvgen(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(workDir, "kvgen")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	command(repoRoot(b), "go", "build", "-o", bin, "./cmd/kvgen")(b)
	return bin
}

func repoRoot(b *testing.B) string {
	b.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		b.Fatal(err)
	}
	return root
}

// timed runs one command and returns how long it took, from start to exit.
type timed func(b *testing.B) time.Duration

// command returns a timed run of a command in dir; it fails the benchmark
// if the command fails.
func command(dir, name string, args ...string) timed {
	return func(b *testing.B) time.Duration {
		b.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		d := time.Since(start)
		if err != nil {
			b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out.Bytes())
		}
		return d
	}
}

// module is a synthesised module of connector packages with its manifest.
type module struct {
	dir    string
	paths  []string // the connectors' import paths, in manifest order
	output string   // the registry file kvgen writes
}

// generate returns a timed kvgen generate run on the module. The registry
// file is removed first, so that every run renders and writes it, as after
// a manifest change; an unchanged file would skip the write.
func (m module) generate(kvgen string) timed {
	gen := command(m.dir, kvgen, "generate")
	return func(b *testing.B) time.Duration {
		b.Helper()
		if err := os.Remove(m.output); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.Fatal(err)
		}
		d := gen(b)
		if _, err := os.Stat(m.output); err != nil {
			b.Fatalf("kvgen wrote no registry file: %v", err)
		}
		return d
	}
}

// connectorModule writes, once per run, a module holding n connector
// packages and a manifest listing them all.
func connectorModule(b *testing.B, n int, same bool) module {
	b.Helper()
	names := namesLabel(same)
	modPath := fmt.Sprintf("example.com/kvbench%d%s", n, names)
	m := module{dir: filepath.Join(workDir, fmt.Sprintf("n%d-%s", n, names))}
	m.output = filepath.Join(m.dir, "reg", "connectors_gen.go")
	var manifest strings.Builder
	manifest.WriteString("version: 1\npackage: reg\noutput: reg/connectors_gen.go\nconnectors:\n")
	files := map[string]string{}
	for i := range n {
		dir := fmt.Sprintf("c%03d", i)
		pkg := "conn" + dir[1:]
		if same {
			pkg = "connector"
		}
		path := modPath + "/" + dir
		m.paths = append(m.paths, path)
		fmt.Fprintf(&manifest, "  - name: conn%03d\n    import: %s\n    constructor: New\n", i, path)
		files[filepath.Join(dir, "connector.go")] = connectorSource(b, pkg, i)
	}
	if _, err := os.Stat(filepath.Join(m.dir, "go.mod")); err == nil {
		return m // written by an earlier -count repetition
	}
	root := repoRoot(b)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		b.Fatal(err)
	}
	files["go.sum"] = string(sum)
	files["connectors.yaml"] = manifest.String()
	for name, content := range files {
		writeFile(b, filepath.Join(m.dir, name), content)
	}
	// go.mod last: its presence says the module is complete.
	writeFile(b, filepath.Join(m.dir, "go.mod"), "module "+modPath+"\n\ngo 1.26.0\n\n"+
		"require github.com/kvgen/kvgen v0.0.0\n\nreplace github.com/kvgen/kvgen => "+root+"\n")
	return m
}

func writeFile(b *testing.B, path, content string) {
	b.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		b.Fatal(err)
	}
}

// connectorTmpl is a connector of the size and shape of a real one: a
// store behind a mutex serving both roles, typed options, sentinel errors.
// Odd-numbered packages return the concrete *Conn, which the generated code
// adapts; even ones return registry.Connector.
var connectorTmpl = template.Must(template.New("connector").Parse(`// Package {{.Pkg}} is synthesised connector number {{.Index}}.
package {{.Pkg}}

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/kvgen/kvgen/registry"
)

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("{{.Pkg}}: closed")

// Options are the connector's extra settings.
type Options struct {
	Capacity int    ` + "`json:\"capacity\"`" + `
	Prefix   string ` + "`json:\"prefix\"`" + `
}

// Conn keeps KV layers in memory.
type Conn struct {
	mu      sync.Mutex
	role    registry.Role
	opts    Options
	layers  map[string][]byte
	pending map[string]int
	closed  bool
}

// New creates a connector for role.
func New(ctx context.Context, cfg registry.Config, role registry.Role) ({{if .Concrete}}*Conn{{else}}registry.Connector{{end}}, error) {
	opts := Options{Capacity: 1 << 10, Prefix: "{{.Pkg}}"}
	if err := registry.DecodeExtra(cfg.Extra, &opts); err != nil {
		return nil, fmt.Errorf("{{.Pkg}}: %w", err)
	}
	return &Conn{role: role, opts: opts, layers: map[string][]byte{}, pending: map[string]int{}}, nil
}

func (c *Conn) key(req *registry.Request, layer string) string {
	return fmt.Sprintf("%s/%s/%s", c.opts.Prefix, req.ID, layer)
}

// MatchedTokens reports no tokens beyond those computed.
func (c *Conn) MatchedTokens(ctx context.Context, req *registry.Request, numComputed int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	return 0, nil
}

// AfterAlloc records how many tokens the engine will load.
func (c *Conn) AfterAlloc(ctx context.Context, req *registry.Request, numExternal int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[req.ID] = numExternal
	return nil
}

// RequestFinished forgets the request.
func (c *Conn) RequestFinished(ctx context.Context, req *registry.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, req.ID)
	return nil
}

// SaveLayer stores a layer's KV.
func (c *Conn) SaveLayer(ctx context.Context, req *registry.Request, layer string, numTokens int, kv []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.layers) >= c.opts.Capacity {
		return fmt.Errorf("{{.Pkg}}: full at %d layers", c.opts.Capacity)
	}
	c.layers[c.key(req, layer)] = append([]byte(nil), kv...)
	return nil
}

// LoadLayer returns a stored layer's KV.
func (c *Conn) LoadLayer(ctx context.Context, req *registry.Request, layer string, numTokens int) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	kv, ok := c.layers[c.key(req, layer)]
	if !ok {
		return nil, registry.ErrMiss
	}
	return kv, nil
}

// WaitForSave returns at once: saves are synchronous.
func (c *Conn) WaitForSave(ctx context.Context) error { return ctx.Err() }

// Finished reports every request as done.
func (c *Conn) Finished(ctx context.Context, finished []string) (sent, received []string, err error) {
	return finished, nil, nil
}

// Close releases the store.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed, c.layers = true, nil
	return nil
}
`))

func connectorSource(b *testing.B, pkg string, index int) string {
	b.Helper()
	var buf strings.Builder
	err := connectorTmpl.Execute(&buf, map[string]any{"Pkg": pkg, "Index": index, "Concrete": index%2 == 1})
	if err != nil {
		b.Fatal(err)
	}
	return buf.String()
}
