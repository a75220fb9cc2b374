package main

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// BenchmarkBesideOCB builds one minimal collector (the otlp and nop
// receivers, the debug and nop exporters, v0.165.0) two ways, warm: with
// the Collector Builder, and with kvgen's two registries under the main.go
// the Builder writes. Each iteration runs every way once, starting with a
// different one each time, so the ways alternate and share the machine's
// moments alike; it reports each way's milliseconds a run and its ratio
// to ocb's full run (ns/op is an iteration's, every way's together):
//
//	ocb                    ocb's full run: generate, get modules, go build
//	ocb-generate           ocb --skip-compilation
//	kvgen                  go generate ./... (one run over both manifests), then go build
//	kvgen-generate         go generate ./... alone
//	kvgen-build            go tool kvgen build over both manifests: generate and build in one
//	kvgen-build-installed  the same, kvgen's binary run directly, as ocb's is
//	go-build               go build alone: the floor both stand on
//
// Each build is `go build -trimpath -ldflags="-s -w"`, as ocb builds. It
// needs ocb on PATH (or in $OCB), installed as a benchmark tool and no
// dependency:
//
//	go install go.opentelemetry.io/collector/cmd/builder@v0.165.0
//
// and the network, for the Collector's modules. kvgen is served to the
// collector's module from a local proxy as a pinned version, as a team
// that requires a kvgen release has it, so that an unchanged tree takes
// its warm path. The work directory is kept between runs (os.TempDir's
// kvgen-ocb-bench) so that the build cache stays warm.
func BenchmarkBesideOCB(b *testing.B) {
	ocb, err := exec.LookPath(cmp.Or(os.Getenv("OCB"), "builder"))
	if err != nil {
		b.Skip("needs ocb: go install go.opentelemetry.io/collector/cmd/builder@v0.165.0")
	}
	w := benchSetup(b, ocb)
	bin := filepath.Join(w.dir, "bin")
	build := []string{"go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "."}
	// Each way builds to a file of its own, as a team's loop does: the
	// go command leaves a binary that is current as it is, and does not
	// copy it again from its cache as it would over another way's.
	kvBuild := func(out string) []string {
		return []string{"build", "-manifest", "receivers.yaml", "-manifest", "exporters.yaml", "-ldflags=-s -w", "-o", filepath.Join(w.dir, out), "."}
	}
	ways := []struct {
		name string
		dir  string
		cmds [][]string
	}{
		{"ocb", w.dir, [][]string{{ocb, "--config", "ocb.yaml"}}},
		{"ocb-generate", w.dir, [][]string{{ocb, "--config", "ocb.yaml", "--skip-compilation"}}},
		{"kvgen", w.kv, [][]string{{"go", "generate", "./..."}, build}},
		{"kvgen-generate", w.kv, [][]string{{"go", "generate", "./..."}}},
		// kvgen's own loop: both registries generated and linked by one
		// command, into the same binary.
		{"kvgen-build", w.kv, [][]string{append([]string{"go", "tool", "kvgen"}, kvBuild("kvgen-build")...)}},
		// The same with kvgen's binary run as ocb's is, installed: without
		// go tool's check that the tool is current.
		{"kvgen-build-installed", w.kv, [][]string{append([]string{w.kvgen}, kvBuild("kvgen-build-installed")...)}},
		{"go-build", w.kv, [][]string{build}},
	}
	// One round first, not timed: a way's first run after the tree or
	// kvgen changed builds what the others then find current.
	for _, way := range ways {
		for _, args := range way.cmds {
			w.run(b, way.dir, args...)
		}
	}
	took := make([]time.Duration, len(ways))
	round := 0
	for b.Loop() {
		for k := range ways {
			way := ways[(round+k)%len(ways)]
			start := time.Now()
			for _, args := range way.cmds {
				w.run(b, way.dir, args...)
			}
			took[(round+k)%len(ways)] += time.Since(start)
		}
		round++
	}
	ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(round) }
	for i, way := range ways {
		b.ReportMetric(ms(took[i]), way.name+"-ms")
		if i > 0 {
			b.ReportMetric(took[i].Seconds()/took[0].Seconds(), way.name+"/ocb")
		}
	}
}

// benchWork is the benchmark's work directory: dir holds ocb's
// configuration and output, kv the collector kvgen links.
type benchWork struct {
	dir, kv string
	env     []string
	kvgen   string // the kvgen binary go tool runs in kv
}

var (
	setupOnce sync.Once
	setupWork *benchWork
	setupErr  string
)

// benchSetup writes and builds both collectors once per process.
func benchSetup(b *testing.B, ocb string) *benchWork {
	setupOnce.Do(func() {
		defer func() {
			if setupWork == nil && setupErr == "" {
				setupErr = "setup failed"
			}
		}()
		setupWork = newBenchWork(b, ocb)
	})
	if setupWork == nil {
		b.Fatal(setupErr)
	}
	return setupWork
}

func newBenchWork(b *testing.B, ocb string) *benchWork {
	root, err := filepath.Abs("../..")
	if err != nil {
		b.Fatal(err)
	}
	dir := filepath.Join(os.TempDir(), "kvgen-ocb-bench")
	w := &benchWork{dir: dir, kv: filepath.Join(dir, "kvgen")}
	if err := os.RemoveAll(w.kv); err != nil {
		b.Fatal(err)
	}
	proxy := filepath.Join(dir, "proxy")
	version := servePinned(b, proxy, root)
	w.env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(proxy)+","+goEnv(b, "GOPROXY"),
		"GONOSUMDB="+kvgenModule, "GOFLAGS=-mod=mod")
	writeFiles(b, dir, map[string]string{
		"ocb.yaml":   ocbConfig("otelcol-ocb", "ocb"),
		"kvocb.yaml": ocbConfig("otelcol-kvgen", "kvgen"),
	})
	w.run(b, dir, ocb, "--config", "ocb.yaml")
	// kvgen's collector: the main.go and go.mod ocb writes, less its
	// components.go, which kvgen's registries replace.
	w.run(b, dir, ocb, "--config", "kvocb.yaml", "--skip-compilation")
	if err := os.Remove(filepath.Join(w.kv, "components.go")); err != nil {
		b.Fatal(err)
	}
	writeFiles(b, w.kv, kvgenFiles)
	w.run(b, w.kv, "go", "mod", "edit", "-require="+kvgenModule+"@"+version, "-tool="+kvgenModule+"/cmd/kvgen")
	w.run(b, w.kv, "go", "mod", "tidy")
	w.run(b, w.kv, "go", "generate", "./...")
	w.run(b, w.kv, "go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(dir, "bin"), ".")
	cmd := exec.Command("go", "tool", "-n", "kvgen")
	cmd.Dir, cmd.Env = w.kv, w.env
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("go tool -n kvgen: %v", err)
	}
	w.kvgen = strings.TrimSpace(string(out))
	return w
}

// run runs a command in dir, failing b with its output if it fails.
func (w *benchWork) run(b *testing.B, dir string, args ...string) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = w.env
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

const kvgenModule = "github.com/kvgen/kvgen"

// servePinned writes, under proxy, a module proxy directory that serves
// the kvgen checkout at root as kvgenModule, at a version named for its
// content: a module cache never holds two contents for one version, so
// each checkout is a version of its own. It returns the version.
func servePinned(b *testing.B, proxy, root string) string {
	var probe bytes.Buffer
	if err := zip.CreateFromDir(&probe, module.Version{Path: kvgenModule, Version: "v0.0.0-bench"}, root); err != nil {
		b.Fatal(err)
	}
	sum := sha256.Sum256(probe.Bytes())
	version := "v0.0.0-bench.h" + hex.EncodeToString(sum[:6])
	at := filepath.Join(proxy, kvgenModule, "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		b.Fatal(err)
	}
	var zipped bytes.Buffer
	if err := zip.CreateFromDir(&zipped, module.Version{Path: kvgenModule, Version: version}, root); err != nil {
		b.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		b.Fatal(err)
	}
	writeFiles(b, at, map[string]string{
		"list":            version + "\n",
		version + ".zip":  zipped.String(),
		version + ".mod":  string(mod),
		version + ".info": `{"Version":"` + version + `"}`,
	})
	return version
}

func goEnv(b *testing.B, key string) string {
	out, err := exec.Command("go", "env", key).Output()
	if err != nil {
		b.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

func writeFiles(b *testing.B, dir string, files map[string]string) {
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// ocbConfig is the Builder's configuration of the benchmark's collector.
func ocbConfig(name, out string) string {
	return `dist:
  name: ` + name + `
  module: example.com/` + name + `
  output_path: ./` + out + `
receivers:
  - gomod: go.opentelemetry.io/collector/receiver/otlpreceiver v0.165.0
  - gomod: go.opentelemetry.io/collector/receiver/nopreceiver v0.165.0
exporters:
  - gomod: go.opentelemetry.io/collector/exporter/debugexporter v0.165.0
  - gomod: go.opentelemetry.io/collector/exporter/nopexporter v0.165.0
`
}

// kvgenFiles are the kvgen collector's manifests, the packages their
// registries go in, and the components function ocb would have written.
var kvgenFiles = map[string]string{
	"receivers.yaml": `version: 1
factory: go.opentelemetry.io/collector/receiver.Factory
output: receivers/registry_gen.go
package: receivers
plugins:
  - {name: otlp, import: go.opentelemetry.io/collector/receiver/otlpreceiver, constructor: NewFactory}
  - {name: nop, import: go.opentelemetry.io/collector/receiver/nopreceiver, constructor: NewFactory}
`,
	"exporters.yaml": `version: 1
factory: go.opentelemetry.io/collector/exporter.Factory
output: exporters/registry_gen.go
package: exporters
plugins:
  - {name: debug, import: go.opentelemetry.io/collector/exporter/debugexporter, constructor: NewFactory}
  - {name: nop, import: go.opentelemetry.io/collector/exporter/nopexporter, constructor: NewFactory}
`,
	"receivers/doc.go": "// Package receivers is the collector's receivers.\npackage receivers\n",
	"exporters/doc.go": "// Package exporters is the collector's exporters.\npackage exporters\n",
	// The directive is split so that go generate in this package does not
	// take it for one of its own.
	"components.go": `package main

//go:` + `generate go tool kvgen -manifest receivers.yaml -manifest exporters.yaml

import (
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"

	"example.com/otelcol-kvgen/exporters"
	"example.com/otelcol-kvgen/receivers"
	"github.com/kvgen/kvgen/registry"
)

// components is the collector's factories, from kvgen's registries.
func components() (otelcol.Factories, error) {
	f := otelcol.Factories{Telemetry: otelconftelemetry.NewFactory()}
	var err error
	if f.Receivers, f.ReceiverModules, err = factories(receivers.Registry.Entries()); err != nil {
		return otelcol.Factories{}, err
	}
	if f.Exporters, f.ExporterModules, err = factories(exporters.Registry.Entries()); err != nil {
		return otelcol.Factories{}, err
	}
	return f, nil
}

// factories is one kind's factory map, and the module of each factory.
func factories[F component.Factory](entries []registry.Plugin[func() F]) (map[component.Type]F, map[component.Type]string, error) {
	list := make([]F, len(entries))
	modules := make(map[component.Type]string, len(entries))
	for i, e := range entries {
		list[i] = e.Factory()
		modules[list[i].Type()] = e.Module + " " + e.Version
	}
	m, err := otelcol.MakeFactoryMap(list...)
	return m, modules, err
}
`,
}
