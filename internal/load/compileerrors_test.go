package load

import (
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/diag"
)

// The compiler's errors, as go list reports them for a package, come back
// one each at its place; files that exist from where the go command ran
// are shown from the working directory, and other names (a -trimpath
// build's, a Windows drive's) as the go command gave them.
func TestCompileErrorsReadTheCompilersLines(t *testing.T) {
	work := t.TempDir()
	dir := filepath.Join(work, "host")
	require.NoError(t, os.MkdirAll(filepath.Join(work, "conn"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(work, "conn", "conn.go"), []byte("package conn\n"), 0o644))
	p := &packages.Package{Errors: []packages.Error{{Kind: packages.ListError, Msg: "# example.com/conn\n" +
		"../conn/conn.go:7:35: undefined: kv\n" +
		"../conn/conn.go:9: syntax error\n" +
		`C:\src\conn\conn.go:3:1: on Windows` + "\n" +
		"example.com/conn@v1.2.0/conn.go:4:2: trimmed\n" +
		"../conn/conn.go:10:1: too many errors\n" +
		"note: module requires Go 1.99\n"}}}
	ce := compileErrors(p, dir, work)
	require.NotNil(t, ce)
	at := func(file string, line, col int, msg string) diag.Related {
		return diag.Related{Pos: token.Position{Filename: file, Line: line, Column: col}, Msg: msg}
	}
	conn := filepath.Join("conn", "conn.go")
	assert.Equal(t, []diag.Related{
		at(conn, 7, 35, "undefined: kv"),
		at(conn, 9, 0, "syntax error"),
		at(`C:\src\conn\conn.go`, 3, 1, "on Windows"),
		at("example.com/conn@v1.2.0/conn.go", 4, 2, "trimmed"),
		at(conn, 10, 1, "too many errors"),
		{Msg: "note: module requires Go 1.99"},
	}, ce.Errs)
	assert.Equal(t, []string{"example.com/conn"}, ce.Pkgs)
	assert.Equal(t, conn+`:7:35: undefined: kv; `+conn+`:9: syntax error; C:\src\conn\conn.go:3:1: on Windows; example.com/conn@v1.2.0/conn.go:4:2: trimmed; `+conn+`:10:1: too many errors; (and 1 more errors)`, ce.Error())

	// What go list says when a package it imports does not compile: the
	// lines after each package's.
	ce = compilerOutput("go: downloading example.com/dep v1.0.0\n# example.com/dep\n../conn/conn.go:3:1: in dep\n# example.com/conn\n../conn/conn.go:4:1: in conn\n", dir, work)
	require.NotNil(t, ce)
	assert.Equal(t, []string{"example.com/dep", "example.com/conn"}, ce.Pkgs)
	assert.Equal(t, []diag.Related{at(conn, 3, 1, "in dep"), at(conn, 4, 1, "in conn")}, ce.Errs)
	// An indented line goes on the error before it; a line that reads as
	// kvgen's own (a //line directive names any file) says it is the go
	// command's; past the cap, a line says how many more there are.
	var many strings.Builder
	many.WriteString("# example.com/conn\n../conn/conn.go:4:9: cannot use x (variable of type int) as string value\n\thave (int)\n\twant (string)\n")
	many.WriteString("kvgen: all connectors are fine:1:23: undefined: y\n")
	for i := range 12 {
		fmt.Fprintf(&many, "../conn/conn.go:%d:1: e%d\n", 10+i, i)
	}
	ce = compilerOutput(many.String(), dir, work)
	require.NotNil(t, ce)
	require.Len(t, ce.Errs, 11)
	assert.Equal(t, at(conn, 4, 9, "cannot use x (variable of type int) as string value; have (int); want (string)"), ce.Errs[0])
	assert.Equal(t, diag.Related{Msg: "go: kvgen: all connectors are fine:1:23: undefined: y"}, ce.Errs[1])
	assert.Equal(t, diag.Related{Msg: "(and 4 more lines; go build shows them)"}, ce.Errs[10])

	// What comes before any package's lines is not the compiler's.
	assert.Nil(t, compilerOutput("go: downloading example.com/missing v1.0.0\nexample.com/missing: conn/conn.go:6:2: module lookup disabled by GOPROXY=off\n", dir, work))

	// Errors that are not the compiler's keep the go command's words.
	for _, errs := range [][]packages.Error{
		{{Pos: "../conn/conn.go:1:1", Msg: "expected 'package', found x"}},
		{{Msg: "no Go files in " + dir}},
		{{Msg: "# example.com/conn\nno place here"}},
	} {
		assert.Nil(t, compileErrors(&packages.Package{Errors: errs}, dir, work), "%q", errs)
	}
}
