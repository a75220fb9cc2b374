package apitext

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

var update = flag.Bool("update", false, "rewrite the API files under api/ to match the code")

// TestAPI checks that api/ holds the exported API of kvgen's public
// packages as it is now, so that every change of API is a diff there.
func TestAPI(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	computed, err := Files(root)
	require.NoError(t, err)
	require.NotEmpty(t, computed, "no public packages found")
	if *update {
		require.NoError(t, WriteFiles(root, computed))
		return
	}
	committed, err := ReadFiles(root)
	require.NoError(t, err)
	if d := Diff(committed, computed); d != "" {
		t.Errorf("the exported API is not what %s/ says (- in %s/, + in the code):\n%s\n"+
			"If the change is meant, accept it with: go run ./internal/regen",
			Dir, Dir, d)
	}
}

// sample has one declaration of each kind, and packages that are not
// public in each way one can be.
var sample = map[string]string{
	"go.mod": "module example.com/m\n\ngo 1.26.0\n",
	"m.go":   "package m\n\nfunc Root() {}\n",
	"p/p.go": `package p

import (
	"context"
	"io"
)

const Untyped = 1

const Long = "0123456789012345678901234567890123456789012345678901234567890123456789012345"

type Kind int

const KindA Kind = 2

var Default = &Options{}

func Variadic(ctx context.Context, names ...string) (n int, err error) { return 0, nil }

func Map[T any, U comparable](xs []T, f func(x T) U) map[U]T { return nil }

func Sum[N Number](xs ...N) N { return 0 }

func Pick[S ~[]E, E any](s S) E { return s[0] }

func Removed() {}

type Options struct {
	Name string
	io.Reader
	*Base
	inner
	hidden int
}

type Base struct{ ID int }

func (b *Base) Reset() {}

type inner struct{ Promoted bool }

func (inner) Hello() string { return "" }

func (o *Options) Close() error { return nil }

type Table[K comparable, V any] struct{ m map[K]V }

func (t *Table[K, V]) Get(k K) (v V, ok bool) { return v, ok }

type Conn interface {
	io.Closer
	Send(ctx context.Context, msg []byte) error
}

type Sealed interface {
	Name() string
	seal()
}

type Number interface{ ~int | ~float64 }

type Empty interface{}

type Handler func(ctx context.Context, ch <-chan struct{ A int ` + "`json:\"a\"`" + ` }) error

type Alias = Options

type Pair[T any] = Table[string, T]

type Chans chan (<-chan int)

func unexported() {}
`,
	"a/b/b.go":              "package b\n\nfunc B() {}\n",
	"internal/q/q.go":       "package q\n\nfunc Q() {}\n",
	"a/internal/r/r.go":     "package r\n\nfunc R() {}\n",
	"cmd/c/main.go":         "package main\n\nfunc main() {}\n",
	"examples/e/e.go":       "package e\n\nfunc E() {}\n",
	"onlytests/x_test.go":   "package onlytests\n",
	"sub/go.mod":            "module example.com/m/sub\n\ngo 1.26.0\n",
	"sub/s.go":              "package sub\n\nfunc S() {}\n",
	"testdata/t/t.go":       "package t\n\nfunc T() {}\n",
	"a/ignored/ignored.go":  "//go:build ignore\n\npackage ignored\n\nfunc I() {}\n",
	"a/windows/only_win.go": "package windows\n\nfunc W() {}\n",
	// The text is of linux/amd64 wherever it is computed.
	"a/windows/win_windows.go": "package windows\n\nfunc OnlyWindows() {}\n",
}

func sampleModule(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	kvgentest.WriteFiles(t, dir, sample)
	return dir
}

func TestLines(t *testing.T) {
	dir := sampleModule(t)
	api, err := Load(dir)
	require.NoError(t, err)
	var paths []string
	for _, p := range api {
		paths = append(paths, p.Path)
	}
	assert.Equal(t, []string{"example.com/m", "example.com/m/a/b", "example.com/m/a/windows", "example.com/m/p"}, paths)

	want := []string{
		"const KindA = 2",
		"const KindA Kind",
		`const Long = "01234567890123456789012345678901234567890123456789012345678901234567...  // "0123456789012345678901234567890123456789012345678901234567890123456789012345"`,
		"const Long untyped string",
		"const Untyped = 1",
		"const Untyped untyped int",
		"func Map[T any, U comparable]([]T, func(T) U) map[U]T",
		"func Pick[S ~[]E, E any](S) E",
		"func Removed()",
		"func Sum[N Number](...N) N",
		"func Variadic(context.Context, ...string) (int, error)",
		"method (*Base) Reset()",
		"method (*Options) Close() error",
		"method (*Table[K, V]) Get(K) (V, bool)",
		"method (Options) Hello() string",
		"method (Options) Read([]byte) (int, error)",
		"method (Options) Reset()",
		"type Alias = Options",
		"type Base struct",
		"type Base struct, ID int",
		"type Chans chan (<-chan int)",
		"type Conn interface { Close, Send }",
		"type Conn interface, Close() error",
		"type Conn interface, Send(context.Context, []byte) error",
		"type Empty interface {}",
		`type Handler func(context.Context, <-chan struct{A int "json:\"a\""}) error`,
		"type Kind int",
		"type Number interface{ ~int | ~float64 }",
		"type Options struct",
		"type Options struct, Name string",
		"type Options struct, embedded *Base",
		"type Options struct, embedded io.Reader",
		"type Pair[T any] = Table[string, T]",
		"type Sealed interface, Name() string",
		"type Sealed interface, unexported methods",
		"type Table[K comparable, V any] struct",
		"var Default *Options",
	}
	for i, l := range want {
		want[i] = "pkg example.com/m/p, " + l
	}
	assert.Equal(t, want, api[3].Lines)
	assert.Equal(t, []string{"pkg example.com/m/a/windows, func W()"}, api[2].Lines)

	files, err := Files(dir)
	require.NoError(t, err)
	var names []string
	for n := range files {
		names = append(names, n)
	}
	assert.ElementsMatch(t, []string{"m.txt", "a_b.txt", "a_windows.txt", "p.txt"}, names)
	assert.Equal(t, "pkg example.com/m, func Root()\n", files["m.txt"])
}

// TestDiff checks that the check can fail: a declaration added, one
// removed and a package made internal each show in the diff, and that
// WriteFiles then brings the files back in line.
func TestDiff(t *testing.T) {
	dir := sampleModule(t)
	files, err := Files(dir)
	require.NoError(t, err)
	require.NoError(t, WriteFiles(dir, files))
	committed, err := ReadFiles(dir)
	require.NoError(t, err)
	assert.Empty(t, Diff(committed, files))

	p := filepath.Join(dir, "p", "p.go")
	src, err := os.ReadFile(p)
	require.NoError(t, err)
	edited := strings.Replace(string(src), "func Removed() {}", "func Added(int) bool { return false }", 1)
	require.NoError(t, os.WriteFile(p, []byte(edited), 0o644))
	require.NoError(t, os.Rename(filepath.Join(dir, "a", "b"), filepath.Join(dir, "internal", "b")))
	kvgentest.WriteFiles(t, dir, map[string]string{"c/c.go": "package c\n\nconst C = 1\n"})

	files, err = Files(dir)
	require.NoError(t, err)
	assert.Equal(t, `api/a_b.txt: no longer a public package
-pkg example.com/m/a/b, func B()
api/c.txt: new public package
+pkg example.com/m/c, const C = 1
+pkg example.com/m/c, const C untyped int
api/p.txt:
-pkg example.com/m/p, func Removed()
+pkg example.com/m/p, func Added(int) bool
`, Diff(committed, files))

	require.NoError(t, WriteFiles(dir, files))
	_, err = os.Stat(filepath.Join(dir, Dir, "a_b.txt"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the file of a package no longer public is removed")
	committed, err = ReadFiles(dir)
	require.NoError(t, err)
	assert.Empty(t, Diff(committed, files))
}

func TestDiffHandEdit(t *testing.T) {
	computed := map[string]string{"p.txt": "pkg p, func A()\npkg p, func B()\n"}
	committed := map[string]string{"p.txt": "pkg p, func B()\npkg p, func A()\n"}
	assert.Equal(t, "api/p.txt:\n(same declarations, but not in the form the test writes)\n", Diff(committed, computed))
}

func TestPublic(t *testing.T) {
	const mod = "github.com/kvgen/kvgen"
	for path, want := range map[string]bool{
		mod:                           true,
		mod + "/gen":                  true,
		mod + "/gen/deploy":           true,
		mod + "/registry/conformance": true,
		mod + "/internal/apitext":     false,
		mod + "/gen/internal/x":       false,
		mod + "/cmd/kvgen":            false,
		mod + "/examples/kvserver":    false,
		mod + "/gen/cmd":              true, // only a top-level cmd/ is commands
		mod + "/internals":            true,
		"example.com/other":           false,
		mod + "x/gen":                 false,
	} {
		assert.Equal(t, want, Public(mod, path), path)
	}
}

func TestFileName(t *testing.T) {
	const mod = "github.com/kvgen/kvgen"
	assert.Equal(t, "gen.txt", FileName(mod, mod+"/gen"))
	assert.Equal(t, "gen_deploy.txt", FileName(mod, mod+"/gen/deploy"))
	assert.Equal(t, "kvgen.txt", FileName(mod, mod))
}
