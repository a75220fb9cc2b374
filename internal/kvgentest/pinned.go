package kvgentest

import (
	"bytes"
	"encoding/json"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
)

// PinnedVersion is the version Pinned serves this checkout's kvgen
// runtime as.
const PinnedVersion = "v0.1.0"

// Pinned is a module proxy directory that serves this checkout's kvgen
// runtime (the registry packages and what they import of kvgen) as
// github.com/kvgen/kvgen PinnedVersion, and the modules added to it; and
// the environment of go commands that take every module from it, into a
// module cache of their own, offline. A module that requires only those is
// one whose every package is a module version go.sum pins, as a host's
// connectors are once published.
type Pinned struct {
	// Dir is the proxy's directory.
	Dir string
	// Env is the test process's environment with GOPROXY, GOMODCACHE,
	// GOFLAGS (-modcacherw added, so that the module cache can be
	// removed), GOSUMDB=off and GOTOOLCHAIN=local set for it.
	Env []string
}

// NewPinned makes a proxy in a temporary directory serving kvgen's
// runtime.
func NewPinned(t testing.TB) *Pinned {
	t.Helper()
	p := &Pinned{Dir: t.TempDir()}
	p.Env = append(os.Environ(),
		"GOPROXY=file://"+filepath.ToSlash(p.Dir),
		"GOMODCACHE="+t.TempDir(),
		"GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -modcacherw"),
		"GOSUMDB=off", "GONOSUMDB=", "GOPRIVATE=", "GOTOOLCHAIN=local",
	)
	p.Add(t, Path, PinnedVersion, runtimeFiles(t))
	return p
}

// runtimeFiles are the Go files of kvgen's registry packages and of the
// packages of kvgen they import, by slash-separated path in the module,
// and a go.mod that requires nothing, as they import only the standard
// library besides.
func runtimeFiles(t testing.TB) map[string]string {
	t.Helper()
	root := Root(t)
	res := Run(t, root, nil, BuildTimeout, "go", "list", "-deps", "-f", `{{if .Module}}{{if .Module.Main}}{{.Dir}}{{range .GoFiles}}{{"\t"}}{{.}}{{end}}{{range .EmbedFiles}}{{"\t"}}{{.}}{{end}}{{end}}{{end}}`, "./registry", "./registry/kv")
	if res.Code != 0 {
		t.Fatalf("go list: exit %d\n%s", res.Code, res.Stderr)
	}
	files := map[string]string{"go.mod": "module " + Path + "\n\ngo 1.26.0\n"}
	for line := range strings.Lines(res.Stdout) {
		fields := strings.Split(strings.TrimSuffix(line, "\n"), "\t")
		if len(fields) < 2 {
			continue
		}
		rel, err := filepath.Rel(root, fields[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range fields[1:] {
			data, err := os.ReadFile(filepath.Join(fields[0], name))
			if err != nil {
				t.Fatal(err)
			}
			files[filepath.ToSlash(filepath.Join(rel, name))] = string(data)
		}
	}
	return files
}

// Add serves module path at version holding files, by slash-separated
// path, go.mod among them.
func (p *Pinned) Add(t testing.TB, path, version string, files map[string]string) {
	t.Helper()
	m := module.Version{Path: path, Version: version}
	var list []modzip.File
	for name, content := range files {
		list = append(list, memFile{path: name, data: []byte(content)})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path() < list[j].Path() })
	var zipped bytes.Buffer
	if err := modzip.Create(&zipped, m, list); err != nil {
		t.Fatal(err)
	}
	escaped, err := module.EscapePath(path)
	if err != nil {
		t.Fatal(err)
	}
	at := filepath.Join(p.Dir, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		t.Fatal(err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	listFile, err := os.OpenFile(filepath.Join(at, "list"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	_, err = listFile.WriteString(version + "\n")
	if cerr := listFile.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		version + ".info": info,
		version + ".mod":  []byte(files["go.mod"]),
		version + ".zip":  zipped.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Host writes, in dir, module modPath holding files, which requires
// kvgen's runtime and the served modules whose packages pkgs names (as
// path@version), and fills its go.sum from the proxy.
func (p *Pinned) Host(t testing.TB, dir, modPath string, files map[string]string, pkgs ...string) {
	t.Helper()
	WriteFiles(t, dir, files)
	WriteFiles(t, dir, map[string]string{"go.mod": "module " + modPath + "\n\ngo 1.26.0\n"})
	args := append([]string{"get", Path + "/registry@" + PinnedVersion}, pkgs...)
	res := Run(t, dir, append(p.Env, "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -modcacherw -mod=mod")), BuildTimeout, "go", args...)
	if res.Code != 0 {
		t.Fatalf("go %s: exit %d\n%s", strings.Join(args, " "), res.Code, res.Stderr)
	}
}

// memFile is a file of a module zip, held in memory.
type memFile struct {
	path string
	data []byte
}

func (f memFile) Path() string                 { return f.path }
func (f memFile) Lstat() (fs.FileInfo, error)  { return memInfo(f), nil }
func (f memFile) Open() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(f.data)), nil }

type memInfo memFile

func (i memInfo) Name() string       { return filepath.Base(i.path) }
func (i memInfo) Size() int64        { return int64(len(i.data)) }
func (i memInfo) Mode() fs.FileMode  { return 0o644 }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return false }
func (i memInfo) Sys() any           { return nil }
