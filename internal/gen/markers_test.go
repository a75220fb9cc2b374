package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/load"
)

// parseContract returns a contract package's files, src and then more,
// as readMarkers reads them: written to a directory, and parsed when a
// reader looks for what they hold.
func parseContract(t *testing.T, src string, more ...string) filesHolding {
	t.Helper()
	dir := t.TempDir()
	var names []string
	for i, text := range append([]string{src}, more...) {
		name := filepath.Join(dir, fmt.Sprintf("contract%d.go", i))
		require.NoError(t, os.WriteFile(name, []byte(text), 0o644))
		names = append(names, name)
	}
	return load.NewSourceFiles(&packages.Package{GoFiles: names}).Holding
}

// A contract's //kvgen:select line is read as data: the key that names an
// entry, where children are, which constructor has them, and the keys a
// config may have.
func TestReadSelect(t *testing.T) {
	files := parseContract(t, `package plug

// Factory makes a plugin.
//
//kvgen:select plugin.name children=with multi=NewChain keys=plugin,with,debug
type Factory func(cfg map[string]any) (any, error)

// NewChain runs its children in turn.
//
//kvgen:constructor
func NewChain(cfg map[string]any) (any, error) { return nil, nil }
`)
	mk, problem := readMarkers(files, "Factory")
	require.Empty(t, problem)
	c := Contract{Path: "example.com/plug", Name: "Factory"}.withMarkers(mk)
	require.NotNil(t, c.Select)
	require.Equal(t, "plugin.name", c.Select.Name)
	require.Equal(t, "with", c.Select.Children)
	require.Equal(t, "NewChain", c.Select.Multi)
	require.Equal(t, []string{"plugin", "with", "debug"}, c.Select.Keys)

	require.True(t, c.Select.HasChildren("example.com/plug", "NewChain"))
	require.True(t, c.Select.HasChildren("example.com/plug", ""), "the constructor the package marks")
	require.False(t, c.Select.HasChildren("example.com/plug", "New"))
	require.False(t, c.Select.HasChildren("example.com/other", "NewChain"))

	// Without multi=, every entry's config may list children.
	mk, problem = readMarkers(parseContract(t, "package plug\n\n//kvgen:select name children=then\ntype F func()\n"), "F")
	require.Empty(t, problem)
	require.True(t, mk.sel.HasChildren("example.com/any", "New"))
	require.Nil(t, mk.sel.Keys)

	// Without the line, no rule.
	mk, problem = readMarkers(parseContract(t, "package plug\n\n//kvgen:roles a\ntype F func()\n"), "F")
	require.Empty(t, problem)
	require.Nil(t, mk.sel)
}

// A contract's markers are read from the files that hold them (the doc
// comment's, the multi= function's, the marked constructor's, each in a
// file of its own here), and no other file of the package is parsed.
func TestReadMarkersParsesOnlyTheFilesThatHoldThem(t *testing.T) {
	holding := parseContract(t,
		"package plug\n\n// Factory makes a plugin.\n//\n//kvgen:select name children=with multi=NewChain\ntype Factory func()\n",
		"package plug\n\n// NewChain runs its children.\nfunc NewChain() {}\n",
		"package plug\n\n// NewLeaf is one.\n//\n//kvgen:constructor\nfunc NewLeaf() {}\n",
		"package plug\n\nfunc Other() {}\n",
		"package plug\n\nfunc broken( {\n")
	mk, problem := readMarkers(holding, "Factory")
	require.Empty(t, problem)
	require.Equal(t, "NewChain", mk.sel.Multi)
	require.Equal(t, []string{"NewLeaf"}, mk.sel.marked)

	// The other files were left as they were read; parsing the package
	// whole finds the broken one.
	_, err := holding()
	require.ErrorContains(t, err, "contract4.go")
}

// A //kvgen:select line that does not parse is a problem that says what
// is wrong with it.
func TestReadSelectProblems(t *testing.T) {
	for line, want := range map[string]string{
		"":                                   "F's //kvgen:select line: want the key that names an entry first, as in kv_connector",
		"children=x":                         "F's //kvgen:select line: want the key that names an entry first, as in kv_connector",
		"a..b":                               `F's //kvgen:select line: "a..b" is not a key, or keys joined by dots`,
		"name child=x":                       `F's //kvgen:select line: unknown option "child"= (did you mean children=?)`,
		"name children":                      `F's //kvgen:select line: "children" is not children=PATH, multi=Func or keys=KEY,...`,
		"name children=a children=b":         "F's //kvgen:select line: children= is given twice",
		"name multi=New":                     "F's //kvgen:select line: multi= names the entries that have children, and there is no children= to say where they are",
		"name children=c multi=Nope":         `F's //kvgen:select line: multi=Nope: the contract's package has no function "Nope"`,
		"name children=c multi=a.B":          `F's //kvgen:select line: multi="a.B": want the name of a function of the contract's package`,
		"name keys=a,,b":                     `F's //kvgen:select line: keys=: "" is not a key`,
		"name keys=name,name":                `F's //kvgen:select line: keys=: "name" is listed twice`,
		"name keys=other":                    `F's //kvgen:select line: keys= does not list "name", the key that names an entry`,
		"name children=c.d keys=name":        `F's //kvgen:select line: keys= does not list "c", where the children are`,
		"name\n//kvgen:select name":          "F's doc comment has more than one //kvgen:select line",
		"name children=c multi=New keys=c,x": `F's //kvgen:select line: keys= does not list "name", the key that names an entry`,
	} {
		src := "package plug\n\n//kvgen:select " + line + "\ntype F func()\n\nfunc New() {}\n"
		_, problem := readMarkers(parseContract(t, src), "F")
		require.Equal(t, want, problem, "line %q", line)
	}
}

// list's summary of an entry is its constructor's doc, or else the
// package's, which may be in a file that does not name the constructor.
func TestSummaryReadsThePackageDocAnywhere(t *testing.T) {
	dir := t.TempDir()
	var names []string
	for name, text := range map[string]string{
		"conn.go": "package kvredis\n\n//kvgen:constructor\nfunc New() {}\n",
		"doc.go":  "// Package kvredis connects to Redis.\npackage kvredis\n",
	} {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
		names = append(names, path)
	}
	s := load.NewSourceFiles(&packages.Package{GoFiles: names})
	require.Equal(t, "Package kvredis connects to Redis.", Summary(s, "New"))
}
