package registry_test

import (
	"encoding/json"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry"
)

// pluginFactory is a contract other than the KV connector's.
type pluginFactory func(name string, params json.RawMessage) (string, error)

func echo(prefix string) pluginFactory {
	return func(name string, _ json.RawMessage) (string, error) { return prefix + name, nil }
}

func TestTableLooksUpByNameAndAlias(t *testing.T) {
	table, err := registry.NewTable(
		registry.Plugin[pluginFactory]{Name: "scorer", Aliases: []string{"prefix-scorer"}, ImportPath: "example.com/p/scorer", Constructor: "New", Factory: echo("s:")},
		registry.Plugin[pluginFactory]{Name: "filter", Factory: echo("f:")},
	)
	require.NoError(t, err)
	for name, want := range map[string]string{"scorer": "s:x", "prefix-scorer": "s:x", "filter": "f:x"} {
		f, ok := table.Lookup(name)
		require.True(t, ok, name)
		got, err := f("x", nil)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
	}
	_, ok := table.Lookup("picker")
	assert.False(t, ok)

	assert.Equal(t, []string{"filter", "scorer"}, table.Names(), "sorted")
	entries := table.Entries()
	require.Len(t, entries, 2)
	assert.Equal(t, "scorer", entries[0].Name, "manifest order")
	e, ok := table.Entry("prefix-scorer")
	require.True(t, ok)
	assert.Equal(t, "example.com/p/scorer", e.ImportPath)

	// What a caller does to what it got leaves the table as it was.
	entries[0].Aliases[0] = "changed"
	_, ok = table.Lookup("prefix-scorer")
	assert.True(t, ok)
}

func TestTableGetNamesTheNearest(t *testing.T) {
	table := registry.MustNewTable("", registry.Plugin[pluginFactory]{Name: "scorer", Factory: echo("")})
	_, err := table.Get("scorr")
	var unknown *registry.UnknownNameError
	require.ErrorAs(t, err, &unknown)
	assert.Equal(t, `unknown plugin "scorr" (did you mean "scorer"?); linked: scorer; to link another, add it to the manifest and regenerate`, err.Error())
}

func TestNewTableRejectsEveryProblemAtOnce(t *testing.T) {
	_, err := registry.NewTable(
		registry.Plugin[pluginFactory]{Name: "a", Aliases: []string{"b"}, Factory: echo("")},
		registry.Plugin[pluginFactory]{Name: "b"},
		registry.Plugin[pluginFactory]{Name: "", Factory: echo("")},
	)
	require.Error(t, err)
	assert.Equal(t, []string{
		`registry: entry 2 ("b"): name "b" is already an alias of entry 1 ("a")`,
		`registry: entry 2 ("b"): nil factory`,
		`registry: entry 3 (""): empty name`,
	}, strings.Split(err.Error(), "\n"))
	assert.Panics(t, func() { registry.MustNewTable("", registry.Plugin[pluginFactory]{Name: "a"}) })
}

// A table of an interface contract holds funcs returning it; a nil func is
// refused as for any other contract.
func TestTableOfInterfaceConstructors(t *testing.T) {
	type plugin interface{ Name() string }
	_, err := registry.NewTable(registry.Plugin[func() plugin]{Name: "a"})
	require.EqualError(t, err, `registry: entry 1 ("a"): nil factory`)
}

// The table fills in versions from the binary's build information, as
// Registry does: this test binary's main module is kvgen.
func TestTableVersions(t *testing.T) {
	info, ok := debug.ReadBuildInfo()
	require.True(t, ok)
	table := registry.MustNewTable("", registry.Plugin[pluginFactory]{Name: "a", Module: info.Main.Path, Factory: echo("")})
	e, _ := table.Entry("a")
	assert.Equal(t, info.Main.Version, e.Version)
	assert.NotEmpty(t, e.Version)
}

func TestPluginServes(t *testing.T) {
	all := registry.Plugin[pluginFactory]{Name: "all"}
	assert.True(t, all.Serves("filter"), "nil roles serve every role")
	assert.True(t, all.Serves("scorer"), "nil roles serve every role")
	scorer := registry.Plugin[pluginFactory]{Name: "scorer", Roles: []string{"scorer"}}
	assert.True(t, scorer.Serves("scorer"))
	assert.False(t, scorer.Serves("filter"))
}

func TestUnknownNameErrorNounAndHint(t *testing.T) {
	table := registry.MustNewTable("", registry.Plugin[pluginFactory]{Name: "scorer", Factory: echo("s:")})
	err := table.Unknown("scorr")
	assert.EqualError(t, err, `unknown plugin "scorr" (did you mean "scorer"?); linked: scorer; to link another, add it to the manifest and regenerate`)
	err.Noun, err.Hint = "scheduler plugin", "see the docs"
	assert.EqualError(t, err, `unknown scheduler plugin "scorr" (did you mean "scorer"?); linked: scorer; see the docs`)
	_, got := table.Get("scorr")
	assert.Equal(t, err.Name, got.(*registry.UnknownNameError).Name)
}
