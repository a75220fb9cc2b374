// The benchmarks time kvgen and the go command as users run them; under
// the race detector they would time the detector, so go test -race leaves
// them out.

//go:build !race

// Package bench_test measures `kvgen generate` against the go command it
// cannot be faster than: `go list -deps=false -export` of the same packages,
// which every run of kvgen pays for.
//
// Run it with:
//
//	go test -run '^$' -bench . -benchtime 5x -count 6 ./gen/bench | tee gen.bench
//	benchstat gen.bench
package bench_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// TestMain removes, when the run ends, the shared directory that holds
// the kvgen binary and the synthesised modules; it lasts the whole run so
// that -count repetitions reuse one warm build cache.
func TestMain(m *testing.M) { os.Exit(kvgentest.Main(m).Run()) }

// BenchmarkGenerate times a `kvgen generate` run, built as a binary, on
// modules of N connector packages, alternating each run with `go list
// -deps=false -export` of the same packages so that both see the same
// machine state. The registry file is removed before each run, so every
// run renders and writes it, as after a manifest change; the cache
// is warm, as it is after the first run on a machine. names=same gives
// every package the name connector (their paths differ), which makes kvgen
// alias every import; names=distinct gives each its own.
//
// cache=cold runs with an empty cache each time: the cost of the
// first run, or of a run after every connector changed.
func BenchmarkGenerate(b *testing.B) {
	kvgen := kvgentest.KVGen(b)
	cases := []struct {
		n    int
		same bool
	}{{10, false}, {100, false}, {400, false}, {1000, false}, {400, true}}
	for _, c := range cases {
		for _, cache := range []string{"warm", "cold"} {
			b.Run(fmt.Sprintf("N=%d/names=%s/cache=%s", c.n, namesLabel(c.same), cache), func(b *testing.B) {
				mod := connectorModule(b, c.n, c.same)
				gen := mod.generate(kvgen)
				if cache == "cold" {
					gen = coldCache(gen)
				}
				alternate(b, gen, mod.goList(), "golist")
			})
		}
	}
}

// BenchmarkCheck times `kvgen check` on an up-to-date tree, the run CI
// makes on every change, alternating with `go list -deps=false -export` of
// the same packages.
func BenchmarkCheck(b *testing.B) {
	kvgen := kvgentest.KVGen(b)
	for _, n := range []int{10, 100, 400, 1000} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			mod := connectorModule(b, n, false)
			mod.generate(kvgen)(b)
			alternate(b, command(mod.dir, kvgen, "check"), mod.goList(), "golist")
		})
	}
}

// BenchmarkBuild times `kvgen build` of the module's host program against
// `go build -trimpath` of the same program with the same registry already
// generated, alternating the two; both write a new binary each time.
func BenchmarkBuild(b *testing.B) {
	kvgen := kvgentest.KVGen(b)
	for _, n := range []int{10, 100, 400} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			mod := connectorModule(b, n, false)
			mod.generate(kvgen)(b)
			bins := b.TempDir()
			custom := filepath.Join(bins, "custom")
			plain := filepath.Join(bins, "plain")
			kvBuild := newBinary(custom, command(mod.dir, kvgen, "build", "-manifest", "connectors.yaml", "-o", custom, "./cmd/host"))
			goBuild := newBinary(plain, command(mod.dir, "go", "build", "-trimpath", "-o", plain, "./cmd/host"))
			alternate(b, kvBuild, goBuild, "gobuild")
		})
	}
}

// BenchmarkSameName compares kvgen generate on 400 packages all named
// connector with 400 packages of distinct names, alternating the two.
func BenchmarkSameName(b *testing.B) {
	kvgen := kvgentest.KVGen(b)
	const n = 400
	b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
		same := connectorModule(b, n, true).generate(kvgen)
		distinct := connectorModule(b, n, false).generate(kvgen)
		alternate(b, same, distinct, "distinct")
	})
}

// alternate runs measured and reference once each to warm the caches, then
// one after the other b.N times, so that both see the same machine state.
// It reports measured's wall time as ns/op and reference's as ref-ns/op,
// their ratio, and the ratio of the CPU time (user and system, the
// commands' children included) that each used, which a busy machine
// disturbs less than wall time; and, where both report it, their peak
// memory and its ratio.
func alternate(b *testing.B, measured, reference timed, ref string) {
	b.Helper()
	reference(b)
	measured(b)
	var m, r cost
	for b.Loop() {
		r = r.add(reference(b))
		m = m.add(measured(b))
	}
	n := float64(b.N)
	b.ReportMetric(float64(m.wall.Nanoseconds())/n, "ns/op")
	b.ReportMetric(float64(r.wall.Nanoseconds())/n, ref+"-ns/op")
	b.ReportMetric(m.wall.Seconds()/r.wall.Seconds(), "ratio")
	b.ReportMetric(m.cpu.Seconds()/r.cpu.Seconds(), "cpu-ratio")
	if m.rss > 0 && r.rss > 0 {
		b.ReportMetric(float64(m.rss)/n/(1<<20), "rss-MB")
		b.ReportMetric(float64(r.rss)/n/(1<<20), ref+"-rss-MB")
		b.ReportMetric(float64(m.rss)/float64(r.rss), "rss-ratio")
	}
}

func namesLabel(same bool) string {
	if same {
		return "same"
	}
	return "distinct"
}

// cost is what running a command took.
type cost struct {
	wall, cpu time.Duration
	rss       int64 // peak resident memory in bytes, where measured
}

func (c cost) add(d cost) cost { return cost{c.wall + d.wall, c.cpu + d.cpu, c.rss + d.rss} }

// timed runs one command and returns what it cost.
type timed func(b *testing.B) cost

// command returns a timed run of a command in dir, with the cache in
// the run's shared directory; it fails the benchmark if the command fails.
func command(dir, name string, args ...string) timed {
	return func(b *testing.B) cost {
		env := append(os.Environ(), "KVGENCACHE="+filepath.Join(kvgentest.SharedDir(b), "cache"))
		return commandEnv(dir, env, name, args...)(b)
	}
}

// coldCache empties the cache before each run.
func coldCache(run timed) timed {
	return func(b *testing.B) cost {
		b.Helper()
		if err := os.RemoveAll(filepath.Join(kvgentest.SharedDir(b), "cache")); err != nil {
			b.Fatal(err)
		}
		return run(b)
	}
}

// newBinary removes bin before each run, so that the run links it anew.
func newBinary(bin string, run timed) timed {
	return func(b *testing.B) cost {
		b.Helper()
		if err := os.Remove(bin); err != nil && !errors.Is(err, fs.ErrNotExist) {
			b.Fatal(err)
		}
		return run(b)
	}
}

// module is a synthesised module of connector packages with its manifest.
type module struct {
	dir    string
	paths  []string // the connectors' import paths, in manifest order
	output string   // the registry file kvgen writes
}

// goList returns a timed `go list -deps=false -export` of the module's
// connector packages: the go command's share of every kvgen run.
func (m module) goList() timed {
	return command(m.dir, "go", append([]string{"list", "-deps=false", "-export"}, m.paths...)...)
}

// generate returns a timed kvgen generate run on the module. The registry
// file is removed first, so that every run renders and writes it, as after
// a manifest change; an unchanged file would skip the write.
func (m module) generate(kvgen string) timed {
	gen := command(m.dir, kvgen, "generate")
	return func(b *testing.B) cost {
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
	// Paths as long as real ones (about 58 characters): past 16 KiB of
	// patterns go/packages splits one load into several go list runs.
	modPath := fmt.Sprintf("github.com/acme-inference/kvbench%d%s", n, names)
	m := module{dir: filepath.Join(kvgentest.SharedDir(b), fmt.Sprintf("n%d-%s", n, names))}
	// The registry is generated into the host program's main package, as
	// in examples/kvserver: kvgen build replaces that file in an overlay.
	m.output = filepath.Join(m.dir, "cmd", "host", "connectors_gen.go")
	var manifest strings.Builder
	manifest.WriteString("version: 1\noutput: cmd/host/connectors_gen.go\nconnectors:\n")
	files := map[string]string{}
	for i := range n {
		dir := fmt.Sprintf("storage/c%04d", i)
		pkg := fmt.Sprintf("conn%04d", i)
		if same {
			pkg = "connector"
		}
		path := modPath + "/" + dir
		m.paths = append(m.paths, path)
		fmt.Fprintf(&manifest, "  - name: conn%04d\n    import: %s\n    constructor: New\n", i, path)
		files[filepath.Join(dir, "connector.go")] = connectorSource(b, pkg, i)
	}
	files["connectors.yaml"] = manifest.String()
	files[filepath.Join("cmd", "host", "main.go")] = hostMain
	writeModule(b, m.dir, modPath, files)
	return m
}

// writeModule writes, once per run, the module modPath in dir holding
// files, which requires this checkout of kvgen.
func writeModule(b *testing.B, dir, modPath string, files map[string]string) {
	b.Helper()
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		return // written by an earlier -count repetition
	}
	kvgentest.WriteModule(b, dir, modPath, files)
}

// hostMain is the module's program: it links the generated registry and
// prints the names of its connectors.
const hostMain = `package main

import (
	"fmt"
	"strings"
)

func main() {
	fmt.Println(strings.Join(Registry.Names(), "\n"))
}
`

func writeFile(b *testing.B, path, content string) {
	b.Helper()
	kvgentest.WriteFiles(b, filepath.Dir(path), map[string]string{filepath.Base(path): content})
}

// connectorTmpl is a connector of the size and shape of a real one: a
// client of a network store with TLS settings, JSON-encoded metadata and a
// local spill directory, behind a mutex, serving both roles, with typed
// options and sentinel errors. Its imports (net/http, crypto/tls,
// encoding/json, os, time) give it export data the size real connectors
// have. Odd-numbered packages return the concrete *Conn, which the
// generated code adapts; even ones return kv.Connector.
var connectorTmpl = template.Must(template.New("connector").Parse(`// Package {{.Pkg}} is synthesised connector number {{.Index}}.
package {{.Pkg}}

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// ErrClosed is returned by every method after Close.
var ErrClosed = errors.New("{{.Pkg}}: closed")

// Options are the connector's extra settings.
type Options struct {
	Endpoint string            ` + "`json:\"endpoint\"`" + `
	Timeout  kv.Duration ` + "`json:\"timeout\"`" + `
	Insecure bool              ` + "`json:\"insecure\"`" + `
	SpillDir string            ` + "`json:\"spill_dir\"`" + `
	Capacity int               ` + "`json:\"capacity\"`" + `
}

// meta is what the store keeps beside each layer.
type meta struct {
	Request string    ` + "`json:\"request\"`" + `
	Layer   string    ` + "`json:\"layer\"`" + `
	Tokens  int       ` + "`json:\"tokens\"`" + `
	Saved   time.Time ` + "`json:\"saved\"`" + `
}

// Conn keeps KV layers in a remote store, spilling to disk.
type Conn struct {
	mu      sync.Mutex
	role    kv.Role
	opts    Options
	client  *http.Client
	layers  map[string][]byte
	pending map[string]int
	closed  bool
}

// New creates a connector for role.
func New(ctx context.Context, cfg kv.Config, role kv.Role) ({{if .Concrete}}*Conn{{else}}kv.Connector{{end}}, error) {
	opts := Options{Endpoint: "https://kv.internal:8443", Timeout: kv.Duration(5 * time.Second), Capacity: 1 << 10}
	if err := kv.DecodeExtra(cfg.Extra, &opts); err != nil {
		return nil, fmt.Errorf("{{.Pkg}}: %w", err)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: opts.Insecure}}
	c := &Conn{role: role, opts: opts, layers: map[string][]byte{}, pending: map[string]int{},
		client: &http.Client{Transport: tr, Timeout: time.Duration(opts.Timeout)}}
	if opts.SpillDir != "" {
		if err := os.MkdirAll(opts.SpillDir, 0o755); err != nil {
			return nil, fmt.Errorf("{{.Pkg}}: spill dir: %w", err)
		}
	}
	return c, nil
}

func (c *Conn) key(req *kv.Request, layer string) string {
	return fmt.Sprintf("%s/%s/%s", c.opts.Endpoint, req.ID, layer)
}

// MatchedTokens reports no tokens beyond those computed.
func (c *Conn) MatchedTokens(ctx context.Context, req *kv.Request, numComputed int) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return 0, ErrClosed
	}
	return 0, nil
}

// AfterAlloc records how many tokens the engine will load.
func (c *Conn) AfterAlloc(ctx context.Context, req *kv.Request, numExternal int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pending[req.ID] = numExternal
	return nil
}

// RequestFinished forgets the request.
func (c *Conn) RequestFinished(ctx context.Context, req *kv.Request) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.pending, req.ID)
	return nil
}

// SaveLayer stores a layer's KV.
func (c *Conn) SaveLayer(ctx context.Context, req *kv.Request, layer string, numTokens int, data []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.layers) >= c.opts.Capacity {
		return fmt.Errorf("{{.Pkg}}: full at %d layers", c.opts.Capacity)
	}
	c.layers[c.key(req, layer)] = append([]byte(nil), data...)
	if c.opts.SpillDir == "" {
		return nil
	}
	m, err := json.Marshal(meta{Request: req.ID, Layer: layer, Tokens: numTokens, Saved: time.Now()})
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(c.opts.SpillDir, req.ID+"-"+layer+".json"), m, 0o644)
}

// LoadLayer returns a stored layer's KV.
func (c *Conn) LoadLayer(ctx context.Context, req *kv.Request, layer string, numTokens int) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	data, ok := c.layers[c.key(req, layer)]
	if !ok {
		return nil, kv.ErrMiss
	}
	return data, nil
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
	c.client.CloseIdleConnections()
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

// BenchmarkGenerateUnchanged times `kvgen generate` on a tree nothing has
// changed in, whose connectors and kvgen's runtime are module versions
// go.sum pins (kvgentest.Pinned), as a host's published connectors are:
// the warm path, which loads no package. It alternates with the same run
// after go.sum gained or lost a blank line, which changes no module but
// the bytes the warm key holds: the ordinary path, which lists the
// packages, finds every check in the cache and the file current
// (ordinary-ns/op); and with `go list -deps=false -export` of the same
// packages (golist-ns/op). No run writes the file.
func BenchmarkGenerateUnchanged(b *testing.B) {
	kvgen := kvgentest.KVGen(b)
	for _, n := range []int{10, 400} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			mod, env := pinnedModule(b, n)
			warm := commandEnv(mod.dir, env, kvgen, "generate")
			sum := filepath.Join(mod.dir, "go.sum")
			ordinary := func(b *testing.B) cost {
				b.Helper()
				data, err := os.ReadFile(sum)
				if err != nil {
					b.Fatal(err)
				}
				if trimmed, ok := bytes.CutSuffix(data, []byte("\n\n")); ok {
					data = append(trimmed, '\n')
				} else {
					data = append(data, '\n')
				}
				if err := os.WriteFile(sum, data, 0o644); err != nil {
					b.Fatal(err)
				}
				return warm(b)
			}
			golist := commandEnv(mod.dir, env, "go", append([]string{"list", "-deps=false", "-export"}, mod.paths...)...)
			for _, run := range []timed{warm, ordinary, golist, warm} {
				run(b)
			}
			written, err := os.Stat(mod.output)
			if err != nil {
				b.Fatal(err)
			}
			var w, o, g cost
			for b.Loop() {
				o = o.add(ordinary(b))
				w = w.add(warm(b))
				g = g.add(golist(b))
			}
			if fi, err := os.Stat(mod.output); err != nil || !fi.ModTime().Equal(written.ModTime()) {
				b.Fatalf("the registry file was written again (%v)", err)
			}
			n := float64(b.N)
			b.ReportMetric(float64(w.wall.Nanoseconds())/n, "ns/op")
			b.ReportMetric(float64(o.wall.Nanoseconds())/n, "ordinary-ns/op")
			b.ReportMetric(float64(g.wall.Nanoseconds())/n, "golist-ns/op")
			b.ReportMetric(float64(w.cpu.Nanoseconds())/n, "cpu-ns/op")
			b.ReportMetric(float64(o.cpu.Nanoseconds())/n, "ordinary-cpu-ns/op")
		})
	}
}

// BenchmarkBuildUnchanged times `kvgen build` of the host program on a
// tree nothing changed in, whose connectors and kvgen's runtime are module
// versions go.sum pins: the warm path, which loads no package and writes
// the registry the last build rendered into the overlay. It alternates
// with `go build -trimpath` of the same program with the same registry
// already generated; both write a new binary each time.
func BenchmarkBuildUnchanged(b *testing.B) {
	kvgen := kvgentest.KVGen(b)
	for _, n := range []int{10, 400} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			mod, env := pinnedModule(b, n)
			bins := b.TempDir()
			custom := filepath.Join(bins, "custom")
			plain := filepath.Join(bins, "plain")
			kvBuild := newBinary(custom, commandEnv(mod.dir, env, kvgen, "build", "-manifest", "connectors.yaml", "-o", custom, "./cmd/host"))
			goBuild := newBinary(plain, commandEnv(mod.dir, env, "go", "build", "-trimpath", "-o", plain, "./cmd/host"))
			kvBuild(b) // the first build leaves the record the others use
			alternate(b, kvBuild, goBuild, "gobuild")
		})
	}
}

// pinnedModule writes a host module whose manifest lists n connector
// packages of one module served by a proxy, example.com/kvbench v0.1.0,
// and generates its registry once; it returns the module and the
// environment of its go commands.
func pinnedModule(b *testing.B, n int) (module, []string) {
	b.Helper()
	p := kvgentest.NewPinned(b)
	const modPath = "github.com/acme-inference/kvbenchpinned"
	files := map[string]string{"go.mod": "module " + modPath + "\n\ngo 1.26.0\n\nrequire " + kvgentest.Path + " " + kvgentest.PinnedVersion + "\n"}
	m := module{dir: b.TempDir()}
	m.output = filepath.Join(m.dir, "cmd", "host", "connectors_gen.go")
	var manifest strings.Builder
	manifest.WriteString("version: 1\noutput: cmd/host/connectors_gen.go\nconnectors:\n")
	for i := range n {
		dir := fmt.Sprintf("storage/c%04d", i)
		path := modPath + "/" + dir
		m.paths = append(m.paths, path)
		fmt.Fprintf(&manifest, "  - name: conn%04d\n    import: %s\n    constructor: New\n", i, path)
		files[dir+"/connector.go"] = connectorSource(b, fmt.Sprintf("conn%04d", i), i)
	}
	p.Add(b, modPath, "v0.1.0", files)
	p.Host(b, m.dir, "example.com/kvbenchhost", map[string]string{
		"connectors.yaml":  manifest.String(),
		"cmd/host/main.go": hostMain,
	}, m.paths[0]+"@v0.1.0")
	env := append(slices.Clip(p.Env), "KVGENCACHE="+filepath.Join(b.TempDir(), "cache"))
	commandEnv(m.dir, env, kvgentest.KVGen(b), "generate")(b)
	return m, env
}

// commandEnv is command with the environment env instead of the test's.
func commandEnv(dir string, env []string, name string, args ...string) timed {
	return func(b *testing.B) cost {
		b.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir, cmd.Env = dir, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		err := cmd.Run()
		wall := time.Since(start)
		if err != nil {
			b.Fatalf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out.Bytes())
		}
		// The rusage of a waited-for process includes its own
		// waited-for children: the go commands kvgen runs.
		ps := cmd.ProcessState
		return cost{wall: wall, cpu: ps.UserTime() + ps.SystemTime()}
	}
}
