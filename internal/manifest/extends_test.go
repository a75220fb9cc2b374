package manifest_test

import (
	"fmt"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/manifest"
)

// A chain of manifests in nested directories: each entry's replace: stays
// relative to the manifest that wrote it, through Dir.
func TestExtendsKeepsReplaceRelativeToItsManifest(t *testing.T) {
	dir := moduleDir(t)
	write := func(name, content string) {
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	write("connectors.yaml", "version: 1\nconnectors:\n  - {name: a, import: example.com/a, replace: mods/a}\n  - {name: b, import: example.com/b, replace: mods/b}\n  - {name: c, import: example.com/c}\n")
	write("deploy/mid.yaml", "version: 1\nextends: ../connectors.yaml\ndrop: [c]\nconnectors:\n  - {name: d, import: example.com/d, replace: ../mods/d}\n")
	write("deploy/edge/top.yaml", "version: 1\nextends: ../mid.yaml\npin:\n  - {name: b, replace: local/b}\n  - {name: a, version: v1.2.3}\n")

	m, err := manifest.LoadIn(dir, "deploy/edge/top.yaml")
	require.NoError(t, err)
	type entry struct{ name, dir, replace, version, replaceFile string }
	var got []entry
	for _, c := range m.Entries {
		got = append(got, entry{c.Name.V, c.Dir, c.Replace.V, c.Version.V, c.Replace.Pos.Filename})
	}
	assert.Equal(t, []entry{
		{"a", "../..", "mods/a", "v1.2.3", "connectors.yaml"},
		{"b", "", "local/b", "", "deploy/edge/top.yaml"},
		{"d", "..", "../mods/d", "", "deploy/mid.yaml"},
	}, got)
	assert.Len(t, m.SHA256, 64)

	// The content hash covers the bases: a change there is a new hash.
	write("connectors.yaml", "version: 1\nconnectors:\n  - {name: a, import: example.com/a, replace: mods/a}\n  - {name: b, import: example.com/b, replace: mods/b}\n  - {name: c, import: example.com/c2}\n")
	m2, err := manifest.LoadIn(dir, "deploy/edge/top.yaml")
	require.NoError(t, err)
	assert.NotEqual(t, m.SHA256, m2.SHA256)
}

// A deployment manifest builds the program its base builds: it has the
// base's contract, and naming another is an error at its factory: line.
func TestExtendsKeepsTheContract(t *testing.T) {
	dir := moduleDir(t)
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("connectors.yaml", "version: 1\nfactory: example.com/gw/plugin.Factory\nconnectors:\n  - {name: a, import: example.com/a}\n")
	write("edge.yaml", "version: 1\nextends: connectors.yaml\nconnectors: []\n")
	m, err := manifest.LoadIn(dir, "edge.yaml")
	require.NoError(t, err)
	path, name, ok := m.Contract()
	require.True(t, ok)
	assert.Equal(t, "example.com/gw/plugin", path)
	assert.Equal(t, "Factory", name)

	write("other.yaml", "version: 1\nextends: connectors.yaml\nfactory: example.com/gw/plugin.Other\nconnectors: []\n")
	_, err = manifest.LoadIn(dir, "other.yaml")
	require.EqualError(t, err, `other.yaml:3:10: factory "example.com/gw/plugin.Other": connectors.yaml names the contract "example.com/gw/plugin.Factory"; a manifest has the contract of the manifest it extends, so remove factory: here`)
}

// extends: and a pin's replace: are paths relative to the manifest, as
// replace: is; a pin's version is a canonical semantic version.
func TestExtendsAndPinsArePlainRelativePaths(t *testing.T) {
	_, err := manifest.Parse("deploy.yaml", []byte("version: 1\nextends: /etc/base.yaml\npin:\n  - {name: a, replace: 'x\\y', version: '1.0'}\n"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), `deploy.yaml:2:10: extends "/etc/base.yaml" is an absolute path, which ties the manifest to one machine`)
	assert.Contains(t, err.Error(), `deploy.yaml:4:24: pin "a": replace "x\\y" contains a backslash`)
	assert.Contains(t, err.Error(), `deploy.yaml:4:40: pin "a": version "1.0" is not a canonical semantic version`)
}

// moduleDir makes a temporary directory holding a go.mod, whose tree
// manifests in it may extend.
func moduleDir(t *testing.T) string {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/m\n"), 0o644))
	return dir
}

// extends: reads only a .yaml or .yml file in the tree of the extending
// manifest's repository (or outermost module), after symbolic links, and
// only if it starts as a manifest; what it refuses is never shown. It once
// showed ten lines of /etc/shadow as unknown keys.
func TestExtendsReadsOnlyManifestsOfItsTree(t *testing.T) {
	top := t.TempDir()
	write := func(name, content string) {
		path := filepath.Join(top, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	const secret = "root:$y$j9T$SECRETHASH:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
	write("outside/shadow", secret)
	write("outside/shadow.yaml", secret)
	write("repo/.git/HEAD", "ref: refs/heads/main\n")
	write("repo/go.mod", "module example.com/repo\n")
	write("repo/connectors.yaml", "# the base\n---\nversion: 1\nconnectors:\n  - {name: a, import: example.com/a}\n")
	write("repo/notes.yaml", secret)
	write("repo/notes.txt", "version: 1\n")
	require.NoError(t, os.Symlink(filepath.Join(top, "outside", "shadow.yaml"), filepath.Join(top, "repo", "link.yaml")))
	// A module nested in the repository, as an example's is, extends the
	// repository's manifest.
	write("repo/example/go.mod", "module example.com/repo/example\n")
	write("repo/example/deploy/dc.yaml", "version: 1\nextends: ../../connectors.yaml\n")
	m, err := manifest.LoadIn(filepath.Join(top, "repo", "example"), "deploy/dc.yaml")
	require.NoError(t, err)
	require.Len(t, m.Entries, 1)

	for base, want := range map[string]string{
		"../../outside/shadow.yaml": "is outside",
		"../../outside/shadow":      "extends: names a manifest, a .yaml or .yml file",
		"../link.yaml":              "is outside",
		"../notes.yaml":             `notes.yaml does not start as a kvgen manifest, with version:`,
		"../notes.txt":              "extends: names a manifest, a .yaml or .yml file",
	} {
		write("repo/deploy/d.yaml", "version: 1\nextends: "+base+"\n")
		_, err := manifest.LoadIn(filepath.Join(top, "repo"), "deploy/d.yaml")
		require.Error(t, err, base)
		assert.Contains(t, err.Error(), want, base)
		assert.NotContains(t, err.Error(), "root:", base)
		assert.NotContains(t, err.Error(), "daemon", base)
	}

	// Without a repository, the outermost module's tree holds.
	require.NoError(t, os.RemoveAll(filepath.Join(top, "repo", ".git")))
	m, err = manifest.LoadIn(filepath.Join(top, "repo", "example"), "deploy/dc.yaml")
	require.NoError(t, err)
	require.Len(t, m.Entries, 1)
}

// A problem in an entry that a pin: changes is the pin's: it is placed
// there, in the file the user wrote, naming the entry as related.
func TestAtPinPlacesProblemsAtThePin(t *testing.T) {
	dir := moduleDir(t)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "connectors.yaml"), []byte("version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n  - name: b\n    import: example.com/b\n"), 0o644))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "deploy"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "deploy", "disk.yaml"), []byte("version: 1\nextends: ../connectors.yaml\npin:\n  - name: a\n    version: v0.2.1\n"), 0o644))
	m, err := manifest.LoadIn(dir, "deploy/disk.yaml")
	require.NoError(t, err)

	a, b := m.Entries[0], m.Entries[1]
	moved := m.AtPin(diag.Errorf(a.Import.Pos, "connector %q: package not found", "a"))
	assert.Equal(t, `deploy/disk.yaml:4:11: connector "a": package not found (as pinned here; the entry is at connectors.yaml:4:13)`, moved.Error())
	require.Len(t, moved.Related, 1)
	assert.Equal(t, a.Import.Pos, moved.Related[0].Pos)

	// Not pinned, or at the pinned version: itself: where it was.
	for _, pos := range []token.Position{b.Import.Pos, a.Version.Pos} {
		e := diag.Errorf(pos, "problem")
		assert.Same(t, e, m.AtPin(e))
	}
}

// A manifest links at most 10000 entries with those of the manifests it
// extends, as one does alone.
func TestExtendsLinksAtMostTenThousand(t *testing.T) {
	if testing.Short() {
		t.Skip("reads manifests of 11000 entries")
	}
	dir := moduleDir(t)
	write(t, dir, "connectors.yaml", "version: 1\nconnectors:\n"+manyEntries("base", 6000))
	write(t, dir, "edge.yaml", "version: 1\nextends: connectors.yaml\nconnectors:\n"+manyEntries("own", 5000))
	_, err := manifest.LoadIn(dir, "edge.yaml")
	require.EqualError(t, err, `edge.yaml:2:10: extends "connectors.yaml": with this manifest's own, 11000 connectors, more than the 10000 a manifest may link; drop some`)
}

// Drops of a large base are looked up by name, and near names suggested
// for the first problems only.
func TestExtendsDropsOfALargeBase(t *testing.T) {
	dir := moduleDir(t)
	write(t, dir, "connectors.yaml", "version: 1\nconnectors:\n"+manyEntries("base", 2000))
	var drops strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&drops, "base%d, ", i)
	}
	write(t, dir, "edge.yaml", "version: 1\nextends: connectors.yaml\ndrop: ["+drops.String()+"bsae7]\nconnectors:\n"+manyEntries("own", 10))
	_, err := manifest.LoadIn(dir, "edge.yaml")
	require.ErrorContains(t, err, `drop "bsae7": connectors.yaml lists no connector named "bsae7"; did you mean "base7"?`)
	write(t, dir, "edge.yaml", "version: 1\nextends: connectors.yaml\ndrop: ["+strings.TrimSuffix(drops.String(), ", ")+"]\nconnectors:\n"+manyEntries("own", 10))
	m, err := manifest.LoadIn(dir, "edge.yaml")
	require.NoError(t, err)
	assert.Len(t, m.Entries, 1000+10)
}

// manyEntries lists n entries named prefix and a number.
func manyEntries(prefix string, n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "  - {name: %s%d, import: example.com/%s%d}\n", prefix, i, prefix, i)
	}
	return b.String()
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}
