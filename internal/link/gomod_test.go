package link

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/mod/modfile"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/manifest"
)

// tree writes files under a new temporary directory and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(data), 0o644))
	}
	return dir
}

// plan plans the manifest host/connectors.yaml against host/go.mod.
func plan(t *testing.T, dir, yaml string) (*Plan, error) {
	t.Helper()
	file := filepath.Join(dir, "host", "connectors.yaml")
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o644))
	m, err := manifest.Load(file)
	require.NoError(t, err)
	main, err := FindMain(context.Background(), filepath.Join(dir, "host"), os.Environ())
	require.NoError(t, err)
	return newPlan(m, main, filepath.Dir(file))
}

func TestPlan(t *testing.T) {
	dir := tree(t, map[string]string{
		"host/go.mod": `module example.com/host

go 1.26.0

require (
	example.com/fast v0.1.0
	example.com/pub v1.2.0
)

replace example.com/fast => ../fast
`,
		"fast/go.mod":  "module example.com/fast\n",
		"other/go.mod": "module example.com/fast\n",
		"v3/go.mod":    "module example.com/big/v3\n",
	})
	entry := func(fields string) string {
		return "version: 1\nconnectors:\n  - name: c\n" + fields
	}

	t.Run("satisfied", func(t *testing.T) {
		p, err := plan(t, dir, entry("    import: example.com/fast/kv\n    version: v0.1.0\n    replace: ../fast\n")+
			"  - name: d\n    import: example.com/pub/kv\n    version: v1.2.0\n  - name: e\n    import: example.com/nover\n")
		require.NoError(t, err)
		assert.Empty(t, p.Lacks)
		assert.NoError(t, p.Err())
		assert.Equal(t, map[int]string{0: "example.com/fast", 1: "example.com/pub"}, p.Modules)
	})
	t.Run("replace without version keeps the required version", func(t *testing.T) {
		p, err := plan(t, dir, entry("    import: example.com/fast\n    replace: ../fast\n"))
		require.NoError(t, err)
		assert.Empty(t, p.Lacks)
	})
	t.Run("other version", func(t *testing.T) {
		p, err := plan(t, dir, entry("    import: example.com/pub/kv\n    version: v1.3.0\n"))
		require.NoError(t, err)
		require.Len(t, p.Lacks, 1)
		l := p.Lacks[0]
		assert.Equal(t, Lack{Pos: l.Pos, Label: `connector "c"`, Import: "example.com/pub/kv", Module: "example.com/pub", Version: "v1.3.0", Have: "v1.2.0"}, l)
		assert.Equal(t, 5, l.Pos.Line)
		assert.EqualError(t, p.Err(), l.Pos.String()+`: connector "c": go.mod lacks example.com/pub v1.3.0 (go.mod requires v1.2.0)`)
		var lacks *LacksError
		assert.ErrorAs(t, p.Err(), &lacks)
	})
	t.Run("a higher requirement satisfies version:", func(t *testing.T) {
		p, err := plan(t, dir, entry("    import: example.com/pub/kv\n    version: v1.1.0\n")+
			"  - name: d\n    import: example.com/fast/kv\n    version: v0.0.9\n    replace: ../fast\n")
		require.NoError(t, err)
		assert.Empty(t, p.Lacks)
	})
	t.Run("unknown module", func(t *testing.T) {
		p, err := plan(t, dir, entry("    import: example.com/new/kv\n    version: v0.3.0\n"))
		require.NoError(t, err)
		require.Len(t, p.Lacks, 1)
		assert.Equal(t, "the module of example.com/new/kv v0.3.0", p.Lacks[0].String())
	})
	t.Run("replaced elsewhere", func(t *testing.T) {
		p, err := plan(t, dir, entry("    import: example.com/fast\n    replace: ../other\n"))
		require.NoError(t, err)
		require.Len(t, p.Lacks, 1)
		assert.Equal(t, "example.com/fast v0.1.0 => ../other", p.Lacks[0].String())
	})
	t.Run("major version", func(t *testing.T) {
		p, err := plan(t, dir, entry("    import: example.com/big/v3/kv\n    replace: ../v3\n"))
		require.NoError(t, err)
		require.Len(t, p.Lacks, 1)
		assert.Equal(t, "example.com/big/v3 v3.0.0-00010101000000-000000000000 => ../v3", p.Lacks[0].String())
	})
	t.Run("errors point at the manifest", func(t *testing.T) {
		_, err := plan(t, dir, entry("    import: example.com/host/kv\n    version: v1.0.0\n")+
			"  - name: d\n    import: example.com/elsewhere\n    replace: ../fast\n"+
			"  - name: e\n    import: example.com/x\n    replace: ../none\n"+
			"  - name: f\n    import: example.com/host/kv\n    replace: .\n")
		var list diag.List
		require.ErrorAs(t, err, &list)
		require.Len(t, list, 4)
		// The registry file's module is the main module: an -o into a
		// connector's module makes that one the main module.
		assert.Contains(t, list[3].Error(), `:14:14: connector "f": replace ".": that is example.com/host, the main module, in which the registry file is generated; drop replace:, or generate the file in another module`)
		assert.Contains(t, list[0].Error(), `:5:14: connector "c": example.com/host/kv is in the main module, example.com/host, which has no version of its own; drop version:`)
		assert.Contains(t, list[1].Error(), `:7:13: connector "d": example.com/elsewhere is not in module example.com/fast, which ../fast holds`)
		assert.Contains(t, list[2].Error(), `:11:14: connector "e": replace "../none": no go.mod in `)
	})
}

func TestPlanEntriesOfOneModuleAgree(t *testing.T) {
	dir := tree(t, map[string]string{
		"host/go.mod":  "module example.com/host\n\nrequire example.com/pub v1.2.0\n",
		"fast/go.mod":  "module example.com/fast\n",
		"fast2/go.mod": "module example.com/fast\n",
	})
	_, err := plan(t, dir, `version: 1
connectors:
  - name: a
    import: example.com/pub/a
    version: v1.3.0
  - name: b
    import: example.com/pub/b
    version: v1.4.0
  - name: c
    import: example.com/fast/c
    replace: ../fast
  - name: d
    import: example.com/fast/d
    replace: ../fast2
  - name: e
    import: example.com/fast/e
    replace: ../fast
    version: v0.1.0
`)
	var list diag.List
	require.ErrorAs(t, err, &list)
	require.Len(t, list, 2)
	assert.Contains(t, list[0].Error(), `:8:14: connector "b": version v1.4.0 of module example.com/pub disagrees with connector "a", version v1.3.0 at `)
	assert.Contains(t, list[1].Error(), `:14:14: connector "d": module example.com/fast is in ../fast2, but connector "c" replaces it by ../fast at `)
}

func TestReplacedBy(t *testing.T) {
	main := &Main{Dir: "/src/host"}
	var err error
	main.file, err = modfile.Parse("go.mod", []byte(`module example.com/host
replace (
	example.com/a => ../a
	example.com/b v1.0.0 => ../b1
	example.com/b => ../b
	example.com/c => /abs/c
	example.com/d => example.com/fork v1.0.0
)
`), nil)
	require.NoError(t, err)
	assert.True(t, replacedBy(main, "example.com/a", "v0.1.0", "/src/a"))
	assert.False(t, replacedBy(main, "example.com/a", "v0.1.0", "/src/host/a"))
	assert.True(t, replacedBy(main, "example.com/b", "v1.0.0", "/src/b1"), "a version's own replacement wins")
	assert.True(t, replacedBy(main, "example.com/b", "v2.0.0", "/src/b"))
	assert.True(t, replacedBy(main, "example.com/c", "v0.1.0", "/abs/c"))
	assert.False(t, replacedBy(main, "example.com/d", "v0.1.0", "/src/host/example.com/fork"), "replaced by a module, not a directory")
	assert.False(t, replacedBy(main, "example.com/e", "v0.1.0", "/src/e"))
}

func TestChanges(t *testing.T) {
	parse := func(s string) *modfile.File {
		f, err := modfile.Parse("go.mod", []byte(s), nil)
		require.NoError(t, err)
		return f
	}
	before := parse(`module m
go 1.26.0
require (
	example.com/up v1.0.0
	example.com/down v1.5.0
	example.com/gone v1.0.0
	example.com/repl v1.0.0
	example.com/same v1.0.0
)
`)
	after := parse(`module m
go 1.26.1
require (
	example.com/up v1.1.0
	example.com/down v1.4.0
	example.com/repl v1.0.0
	example.com/same v1.0.0
	example.com/new v0.1.0
	example.com/local v0.0.0
)
replace example.com/local => ../local
replace example.com/repl => ./repl
`)
	assert.Equal(t, []string{
		"go 1.26.1 (was 1.26.0)",
		"upgraded example.com/up v1.0.0 -> v1.1.0",
		"downgraded example.com/down v1.5.0 -> v1.4.0",
		"replaced example.com/repl v1.0.0 => ./repl",
		"added example.com/new v0.1.0",
		"added example.com/local v0.0.0 => ../local",
		"removed example.com/gone v1.0.0",
	}, changes(before, after))
	assert.Empty(t, changes(before, before))
}

func TestFindMainOutsideModule(t *testing.T) {
	t.Setenv("GOFLAGS", "")
	dir := t.TempDir()
	// A go.mod in no parent: the temporary directory's parents have none
	// on a normal machine; make sure of this one.
	if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "go.mod")); err == nil {
		t.Skip("a parent of the temporary directory holds a go.mod")
	}
	_, err := FindMain(context.Background(), dir, os.Environ())
	assert.ErrorIs(t, err, ErrNoModule)
	assert.ErrorContains(t, err, "go mod init")
}

func TestMajorMismatch(t *testing.T) {
	for _, tc := range []struct {
		mod, importPath, version, want string
	}{
		{"", "example.com/kv", "v1.2.0", ""},
		{"", "example.com/kv/sub", "v0.1.0", ""},
		{"", "example.com/kv/v3/sub", "v3.1.0", ""},
		{"example.com/kv/v3", "example.com/kv/v3/sub", "v3.1.0", ""},
		{"example.com/kv", "example.com/kv", "v2.0.0+incompatible", ""},
		{"", "gopkg.in/yaml.v3", "v3.0.1", ""},
		{"", "example.com/kv/sub", "v2.0.0", "version v2.0.0 is major version 2, but example.com/kv/sub is in no v2 module: from v2 on, a module's path ends in its major version, as in example.com/kv/sub/v2; "},
		{"", "example.com/kv/v3/sub", "v4.0.0", "version v4.0.0 is major version 4, but module example.com/kv/v3 is a v3 module, whose versions are v3.x.y; name one, or import the package from example.com/kv"},
		{"example.com/kv", "example.com/kv/sub", "v9.9.9", "version v9.9.9 is major version 9, but module example.com/kv is not a v9 module: from v2 on, a module's path ends in its major version, so its v9 is example.com/kv/v9; "},
		{"example.com/kv/v2", "example.com/kv/v2", "v1.0.0", "version v1.0.0 is major version 1, but module example.com/kv/v2 is a v2 module, whose versions are v2.x.y; name one, or import the package from example.com/kv"},
	} {
		got := majorMismatch(tc.mod, tc.importPath, tc.version)
		if tc.want == "" {
			assert.Empty(t, got, "%+v", tc)
		} else {
			assert.True(t, strings.HasPrefix(got, tc.want), "%+v:\n got %s", tc, got)
		}
	}
}
