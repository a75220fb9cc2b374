package manifest

import (
	"bytes"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/diag"
)

const file = "connectors.yaml"

func at(line, col int) token.Position {
	return token.Position{Filename: file, Line: line, Column: col}
}

// noOffset drops the byte offset so that tests can state positions as
// line:col, as users read them.
func noOffset(p token.Position) token.Position {
	p.Offset = 0
	return p
}

const fullManifest = `# The connectors of the example server.
version: 1
package: connectors
output: gen/connectors_gen.go
connectors:
  - name: filesystem
    import: github.com/kvgen/kvgen/examples/connectors/filesystem
    constructor: New
    roles: [scheduler, worker]
    aliases: [ExampleConnector, FSConnector]
    version: v1.4.0
    replace: ../filesystem
  - import: example.com/lmcache
    name: LMCacheConnectorV1
    roles:
      - worker
`

func TestParseFull(t *testing.T) {
	src := fullManifest
	m, err := Parse(file, []byte(src))
	require.NoError(t, err)

	assert.Equal(t, file, m.File)
	assert.Equal(t, Value[int]{V: 1, Pos: at(2, 10), Set: true}, withoutOffset(m.Version))
	assert.Equal(t, Value[string]{V: "connectors", Pos: at(3, 10), Set: true}, withoutOffset(m.Package))
	assert.Equal(t, Value[string]{V: "gen/connectors_gen.go", Pos: at(4, 9), Set: true}, withoutOffset(m.Output))
	require.Len(t, m.Entries, 2)

	fs := m.Entries[0]
	assert.Equal(t, at(6, 5), noOffset(fs.Pos))
	assert.Equal(t, Value[string]{V: "filesystem", Pos: at(6, 11), Set: true}, withoutOffset(fs.Name))
	assert.Equal(t, Value[string]{V: "github.com/kvgen/kvgen/examples/connectors/filesystem", Pos: at(7, 13), Set: true}, withoutOffset(fs.Import))
	assert.Equal(t, Value[string]{V: "New", Pos: at(8, 18), Set: true}, withoutOffset(fs.Constructor))
	assert.Equal(t, []Value[string]{
		{V: "scheduler", Pos: at(9, 13), Set: true},
		{V: "worker", Pos: at(9, 24), Set: true},
	}, withoutOffsets(fs.Roles))
	assert.Equal(t, []Value[string]{
		{V: "ExampleConnector", Pos: at(10, 15), Set: true},
		{V: "FSConnector", Pos: at(10, 33), Set: true},
	}, withoutOffsets(fs.Aliases))
	assert.Equal(t, Value[string]{V: "v1.4.0", Pos: at(11, 14), Set: true}, withoutOffset(fs.Version))
	assert.Equal(t, Value[string]{V: "../filesystem", Pos: at(12, 14), Set: true}, withoutOffset(fs.Replace))
	assert.Equal(t, []string{"scheduler", "worker"}, fs.RoleNames())

	lm := m.Entries[1]
	assert.Equal(t, at(13, 5), noOffset(lm.Pos), "an entry's position is its first key, whichever it is")
	assert.Equal(t, Value[string]{V: "LMCacheConnectorV1", Pos: at(14, 11), Set: true}, withoutOffset(lm.Name))
	assert.Equal(t, Value[string]{V: "example.com/lmcache", Pos: at(13, 13), Set: true}, withoutOffset(lm.Import))
	assert.Equal(t, []Value[string]{{V: "worker", Pos: at(16, 9), Set: true}}, withoutOffsets(lm.Roles))
	assert.Equal(t, []string{"worker"}, lm.RoleNames())
	assert.Equal(t, `connector "LMCacheConnectorV1"`, lm.Label(1))
}

func TestParseOffsets(t *testing.T) {
	// yaml.v3 counts columns in characters; positions count bytes, as Go's do.
	src := "version: 1\nconnectors:\n  - {replace: ../ünï, name: redis, import: example.com/a}\n"
	m, err := Parse(file, []byte(src))
	require.NoError(t, err)
	c := m.Entries[0]
	assert.Equal(t, at(3, 31), noOffset(c.Name.Pos))
	for _, v := range []Value[string]{c.Replace, c.Name, c.Import} {
		assert.True(t, strings.HasPrefix(src[v.Pos.Offset:], v.V), "the offset of %q points at it", v.V)
	}
}

func withoutOffset[T any](v Value[T]) Value[T] {
	v.Pos = noOffset(v.Pos)
	return v
}

func withoutOffsets[T any](vs []Value[T]) []Value[T] {
	out := make([]Value[T], len(vs))
	for i, v := range vs {
		out[i] = withoutOffset(v)
	}
	return out
}

func TestParseDefaults(t *testing.T) {
	m, err := Parse(file, []byte("version: 1\nconnectors:\n  - name: memory\n    import: example.com/memory\n"))
	require.NoError(t, err)

	assert.Equal(t, Value[string]{}, m.Package, "an absent package is left to gen")
	assert.Equal(t, Value[string]{V: "connectors_gen.go"}, m.Output, "output defaults, unset and without position")
	c := m.Entries[0]
	assert.Equal(t, Value[string]{}, c.Constructor, "an absent constructor is left to the package's marker")
	assert.Empty(t, c.Roles)
	assert.Empty(t, c.Aliases)
	assert.Equal(t, Value[string]{}, c.Version)
	assert.Equal(t, Value[string]{}, c.Replace)
	assert.Nil(t, c.RoleNames(), "no roles list serves every role")
}

func TestParseValid(t *testing.T) {
	for name, src := range map[string]string{
		"no connectors":            "version: 1\nconnectors: []\n",
		"flow style":               "{version: 1, connectors: [{name: a, import: example.com/a}]}\n",
		"crlf":                     "version: 1\r\nconnectors:\r\n  - name: a\r\n    import: example.com/a\r\n",
		"byte order mark":          "\uFEFFversion: 1\nconnectors: []\n",
		"document markers":         "---\nversion: 1\nconnectors: []\n...\n",
		"standard library import":  "version: 1\nconnectors:\n  - name: a\n    import: fmt\n",
		"pseudo-version":           "version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n    version: v0.0.0-20260102150405-abcdefabcdef\n",
		"incompatible version":     "version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n    version: v2.1.0+incompatible\n",
		"prerelease version":       "version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n    version: v1.0.0-rc.1\n",
		"names with punctuation":   "version: 1\nconnectors:\n  - name: My_conn.v2-beta\n    import: example.com/a\n    aliases: [LMCacheConnectorV1]\n",
		"names differing in case":  "version: 1\nconnectors:\n  - name: redis\n    import: example.com/a\n  - name: Redis\n    import: example.com/b\n",
		"replace in this dir":      "version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n    replace: .\n",
		"output in a subdirectory": "version: 1\nconnectors: []\noutput: internal/gen/registry.go\n",
		"anchor without alias":     "version: 1\nconnectors:\n  - &a {name: a, import: example.com/a}\n",
		"main package":             "version: 1\npackage: main\nconnectors: []\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Parse(file, []byte(src))
			assert.NoError(t, err)
		})
	}
}

const head = "version: 1\nconnectors:\n"

// badManifests are manifests with the exact errors Parse reports for them.
var badManifests = []struct {
	name string
	src  string
	want []string
}{
	{
		name: "yaml syntax error",
		src:  head + "  - name: a\n    import: example.com/a\n  - name: b: c\n",
		want: []string{`connectors.yaml:5:3: invalid YAML: mapping values are not allowed in this context; a key is indented more than the keys beside it, or a value that holds ": " needs quotes`},
	},
	{
		name: "key indented more than its neighbours",
		src:  head + "  - name: a\n     import: example.com/a\n",
		want: []string{`connectors.yaml:4:6: invalid YAML: mapping values are not allowed in this context; a key is indented more than the keys beside it, or a value that holds ": " needs quotes`},
	},
	{
		name: "unclosed quote",
		src:  head + "  - name: \"a\n    import: example.com/a\n",
		want: []string{"connectors.yaml:3:11: invalid YAML: found unexpected end of stream; this quoted value is not closed"},
	},
	{
		name: "unclosed quote after closed ones",
		src:  head + "  - name: 'it''s' # a \"comment\n    aliases: [\"x\\\"y\", \"z]\n",
		want: []string{"connectors.yaml:4:23: invalid YAML: found unexpected end of stream; this quoted value is not closed"},
	},
	{
		name: "unclosed flow list",
		src:  "version: 1\nconnectors: [\n",
		want: []string{"connectors.yaml:2:1: invalid YAML: did not find expected node content"},
	},
	{
		name: "tab indentation",
		src:  head + "  - name: a\n    import: example.com/a\n\troles: [worker]\n",
		want: []string{"connectors.yaml:5:1: invalid YAML: a tab in the indentation; indent with spaces"},
	},
	{
		name: "control character",
		src:  head + "  - name: a\x01\n",
		want: []string{"connectors.yaml:3:12: invalid YAML: control characters are not allowed"},
	},
	{
		name: "invalid utf-8",
		src:  head + "  - name: \xff\n",
		want: []string{"connectors.yaml:3:11: invalid YAML: invalid leading UTF-8 octet"},
	},
	{
		name: "utf-16",
		src:  "\xff\xfev\x00",
		want: []string{"connectors.yaml:1:1: the manifest is encoded in UTF-16; save it as UTF-8"},
	},
	{
		// An import path of a megabyte would reach the go command, and
		// every message that names it.
		name: "import path too long",
		src:  head + "  - name: a\n    import: example.com/" + strings.Repeat("a", 2000) + "\n",
		want: []string{`connectors.yaml:4:13: connector "a": import has 2012 bytes: want at most 1024`},
	},
	{
		// Both invisible: the YAML reader then drops the first character
		// of every later line, "#" included.
		name: "a second byte order mark",
		src:  "\uFEFF\uFEFFversion: 1\nconnectors: []\n#  - name: evil\n",
		want: []string{"connectors.yaml:1:1: an invisible byte order mark (U+FEFF), which YAML readers read differently; remove it"},
	},
	{
		// An editor shows no byte order mark, and counts columns after it.
		name: "a byte order mark before a problem",
		src:  "\uFEFFversoin: 1\nconnectors: []\n",
		want: []string{`connectors.yaml:1:1: unknown key "versoin"; did you mean "version"?`, `connectors.yaml:1:1: missing key "version"; add it, e.g. "version: 1"`},
	},
	{
		name: "a byte order mark inside",
		src:  head + "  - name: a\n    import: example.com/a \uFEFF\n",
		want: []string{"connectors.yaml:4:27: an invisible byte order mark (U+FEFF), which YAML readers read differently; remove it"},
	},
	{
		name: "empty file",
		src:  "# nothing yet\n",
		want: []string{`connectors.yaml:1:1: the manifest is empty; start it with "version: 1" and a connectors list`},
	},
	{
		name: "non-map top level",
		src:  "- name: a\n  import: example.com/a\n",
		want: []string{"connectors.yaml:1:1: the manifest must be a mapping with keys such as version and connectors, got a list"},
	},
	{
		name: "multiple documents",
		src:  "version: 1\nconnectors: []\n---\nversion: 1\nconnectors: []\n",
		want: []string{`connectors.yaml:3:1: a second YAML document; a manifest is a single document, so remove this "---" and what follows or move it to its own file`},
	},
	{
		name: "unknown top-level key with suggestion",
		src:  "version: 1\nconectors: []\n",
		want: []string{
			`connectors.yaml:1:1: missing key "connectors" (or "plugins"); add it, e.g. "connectors: []"`,
			`connectors.yaml:2:1: unknown key "conectors"; did you mean "connectors"?`,
		},
	},
	{
		name: "unknown top-level key without suggestion",
		src:  "version: 1\nconnectors: []\nxyzzy: []\n",
		want: []string{`connectors.yaml:3:1: unknown key "xyzzy"; the keys are version, factory, package, output, extends, drop, pin, connectors, plugins`},
	},
	{
		name: "both spellings of the list",
		src:  "version: 1\nplugins: []\nconnectors: []\n",
		want: []string{`connectors.yaml:3:1: connectors: and plugins: are one list spelt two ways; give one`},
	},
	{
		name: "factory without a type name",
		src:  "version: 1\nfactory: example.com/gateway/plugin\nconnectors: []\n",
		want: []string{`connectors.yaml:2:10: factory "example.com/gateway/plugin" is not IMPORT/PATH.TypeName; name the contract's type with its package's import path, e.g. "example.com/gateway/plugin.Factory"`},
	},
	{
		name: "factory with an unexported type",
		src:  "version: 1\nfactory: example.com/gateway/plugin.factory\nconnectors: []\n",
		want: []string{`connectors.yaml:2:10: factory "example.com/gateway/plugin.factory": "factory" is not an exported Go identifier; name an exported type, e.g. "example.com/gateway/plugin.Factory"`},
	},
	{
		name: "factory with a bad import path",
		src:  "version: 1\nfactory: ../plugin.Factory\nconnectors: []\n",
		want: []string{`connectors.yaml:2:10: factory "../plugin.Factory": "../plugin" is not a valid Go import path: invalid path element ".."; e.g. "example.com/gateway/plugin.Factory"`},
	},
	{
		name: "unknown connector key with suggestion",
		src:  head + "  - name: redis\n    imprt: example.com/redis\n",
		want: []string{
			`connectors.yaml:3:5: connector "redis": missing key "import"; add it, e.g. "import: github.com/acme/kvredis"`,
			`connectors.yaml:4:5: connector "redis": unknown key "imprt"; did you mean "import"?`,
		},
	},
	{
		name: "duplicate key",
		src:  head + "  - name: redis\n    import: example.com/redis\n    name: cache\n",
		want: []string{`connectors.yaml:5:5: connector "redis": key "name" is given twice (first at connectors.yaml:3:5); remove one`},
	},
	{
		name: "duplicate top-level key",
		src:  "version: 1\nconnectors: []\nversion: 1\n",
		want: []string{`connectors.yaml:3:1: key "version" is given twice (first at connectors.yaml:1:1); remove one`},
	},
	{
		name: "list as name, map as import",
		src:  head + "  - name: [redis]\n    import: {path: example.com/redis}\n",
		want: []string{
			`connectors.yaml:3:11: connector 1: name: want a string, got a list; e.g. "name: redis"`,
			`connectors.yaml:4:13: connector 1: import: want a string, got a mapping; e.g. "import: github.com/acme/kvredis"`,
		},
	},
	{
		name: "string version",
		src:  "version: \"1\"\nconnectors: []\n",
		want: []string{`connectors.yaml:1:10: version: want an integer, got a string; e.g. "version: 1"`},
	},
	{
		name: "number as module version",
		src:  head + "  - name: redis\n    import: example.com/redis\n    version: 1.2\n",
		want: []string{`connectors.yaml:5:14: connector "redis": version: want a string, got a number; e.g. "version: v1.4.0"`},
	},
	{
		name: "roles as a string",
		src:  head + "  - name: redis\n    import: example.com/redis\n    roles: worker\n",
		want: []string{`connectors.yaml:5:12: connector "redis": roles: want a list, got a string; e.g. "roles: [scheduler, worker]"`},
	},
	{
		name: "entry that is not a mapping",
		src:  head + "  - redis\n",
		want: []string{"connectors.yaml:3:5: connector 1: want a mapping with keys such as name and import, got a string"},
	},
	{
		name: "empty name",
		src:  head + "  - name: \"\"\n    import: example.com/redis\n",
		want: []string{`connectors.yaml:3:11: connector 1: name is empty; give a value, e.g. "name: redis"`},
	},
	{
		name: "null name",
		src:  head + "  - name:\n    import: example.com/redis\n",
		want: []string{`connectors.yaml:3:10: connector 1: name is empty; give a value, e.g. "name: redis"`},
	},
	{
		name: "empty optional value",
		src:  head + "  - name: redis\n    import: example.com/redis\n    constructor: ''\n",
		want: []string{`connectors.yaml:5:18: connector "redis": constructor is empty; give a value, e.g. "constructor: New", or leave the key out`},
	},
	{
		name: "name starting with a digit",
		src:  head + "  - name: 3fs\n    import: example.com/fs\n",
		want: []string{`connectors.yaml:3:11: connector 1: name "3fs" cannot start with '3'; a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'`},
	},
	{
		name: "name with a space",
		src:  head + "  - name: my redis\n    import: example.com/redis\n",
		want: []string{`connectors.yaml:3:11: connector 1: name "my redis" cannot contain ' '; a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'`},
	},
	{
		name: "name with quotes",
		src:  head + "  - name: 'red\"is'\n    import: example.com/redis\n",
		want: []string{`connectors.yaml:3:11: connector 1: name "red\"is" cannot contain '"'; a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'`},
	},
	{
		name: "name with a newline",
		src:  head + "  - name: \"red\\nis\"\n    import: example.com/redis\n",
		want: []string{`connectors.yaml:3:11: connector 1: name "red\nis" cannot contain '\n'; a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'`},
	},
	{
		name: "name closing a comment",
		src:  head + "  - name: redis*/\n    import: example.com/redis\n",
		want: []string{`connectors.yaml:3:11: connector 1: name "redis*/" cannot contain '*'; a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'`},
	},
	{
		name: "invalid alias",
		src:  head + "  - name: redis\n    import: example.com/redis\n    aliases: [ok, not ok]\n",
		want: []string{`connectors.yaml:5:19: connector "redis": alias "not ok" cannot contain ' '; a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'`},
	},
	{
		name: "duplicate name",
		src:  head + "  - name: redis\n    import: example.com/a\n  - name: redis\n    import: example.com/b\n",
		want: []string{`connectors.yaml:5:11: connector "redis": name "redis" is already the name of connector "redis" at connectors.yaml:3:11; rename one of them`},
	},
	{
		name: "duplicate alias",
		src:  head + "  - name: a\n    import: example.com/a\n    aliases: [shared]\n  - name: b\n    import: example.com/b\n    aliases: [shared]\n",
		want: []string{`connectors.yaml:8:15: connector "b": alias "shared" is already an alias of connector "a" at connectors.yaml:5:15; rename one of them`},
	},
	{
		name: "alias equal to an earlier name",
		src:  head + "  - name: x\n    import: example.com/x\n  - name: b\n    import: example.com/b\n    aliases: [x]\n",
		want: []string{`connectors.yaml:7:15: connector "b": alias "x" is already the name of connector "x" at connectors.yaml:3:11; rename one of them`},
	},
	{
		name: "name equal to an earlier alias",
		src:  head + "  - name: a\n    import: example.com/a\n    aliases: [x]\n  - name: x\n    import: example.com/x\n",
		want: []string{`connectors.yaml:6:11: connector "x": name "x" is already an alias of connector "a" at connectors.yaml:5:15; rename one of them`},
	},
	{
		name: "alias listed twice",
		src:  head + "  - name: a\n    import: example.com/a\n    aliases: [x, x]\n",
		want: []string{`connectors.yaml:5:18: connector "a": aliases: "x" is listed twice (first at connectors.yaml:5:15); remove one`},
	},
	{
		name: "alias equal to its own name",
		src:  head + "  - name: redis\n    import: example.com/redis\n    aliases: [redis]\n",
		want: []string{`connectors.yaml:5:15: connector "redis": alias "redis" is the connector's own name; remove it`},
	},
	{
		name: "import path with a space",
		src:  head + "  - name: redis\n    import: \"github.com/x/ bad\"\n",
		want: []string{`connectors.yaml:4:13: connector "redis": import "github.com/x/ bad" is not a valid Go import path: invalid char ' '; give the package's full import path, e.g. "github.com/acme/kvredis"`},
	},
	{
		name: "relative import path",
		src:  head + "  - name: redis\n    import: ../relative\n",
		want: []string{`connectors.yaml:4:13: connector "redis": import "../relative" is not a valid Go import path: invalid path element ".."; give the package's full import path, e.g. "github.com/acme/kvredis"`},
	},
	{
		name: "version without v",
		src:  head + "  - name: redis\n    import: example.com/redis\n    version: \"1.2\"\n",
		want: []string{`connectors.yaml:5:14: connector "redis": version "1.2" is not a semantic version; want a version such as v1.4.0`},
	},
	{
		name: "version not canonical",
		src:  head + "  - name: redis\n    import: example.com/redis\n    version: v1.2\n",
		want: []string{`connectors.yaml:5:14: connector "redis": version "v1.2" is not in canonical form; want a version such as v1.4.0, here "v1.2.0"`},
	},
	{
		name: "lowercase constructor",
		src:  head + "  - name: redis\n    import: example.com/redis\n    constructor: newRedis\n",
		want: []string{`connectors.yaml:5:18: connector "redis": constructor "newRedis" is lowercase: unexported functions cannot be called from the generated package; export it`},
	},
	{
		name: "constructor with parentheses",
		src:  head + "  - name: redis\n    import: example.com/redis\n    constructor: New()\n",
		want: []string{`connectors.yaml:5:18: connector "redis": constructor "New()" is not a Go identifier; give the function's name only, e.g. "New"`},
	},
	{
		name: "qualified constructor",
		src:  head + "  - name: redis\n    import: example.com/redis\n    constructor: redis.New\n",
		want: []string{`connectors.yaml:5:18: connector "redis": constructor "redis.New" is not a Go identifier; give the function's name only, e.g. "New"`},
	},
	{
		name: "duplicate role",
		src:  head + "  - name: redis\n    import: example.com/redis\n    roles: [worker, scheduler, worker]\n",
		want: []string{`connectors.yaml:5:32: connector "redis": roles: "worker" is listed twice (first at connectors.yaml:5:13); remove one`},
	},
	{
		name: "empty roles list",
		src:  head + "  - name: redis\n    import: example.com/redis\n    roles: []\n",
		want: []string{`connectors.yaml:5:12: connector "redis": roles is an empty list; list at least 1, e.g. "roles: [scheduler, worker]", or leave the key out`},
	},
	{
		name: "empty alias",
		src:  head + "  - name: redis\n    import: example.com/redis\n    aliases: [a, '']\n",
		want: []string{`connectors.yaml:5:18: connector "redis": aliases: an item is empty; remove it or give a value`},
	},
	{
		name: "absolute replace",
		src:  head + "  - name: redis\n    import: example.com/redis\n    replace: /home/me/redis\n",
		want: []string{`connectors.yaml:5:14: connector "redis": replace "/home/me/redis" is an absolute path, which ties the manifest to one machine; give the module's directory relative to the manifest, e.g. "../kvredis"`},
	},
	{
		name: "windows absolute replace",
		src:  head + "  - name: redis\n    import: example.com/redis\n    replace: C:\\redis\n",
		want: []string{`connectors.yaml:5:14: connector "redis": replace "C:\\redis" is an absolute path, which ties the manifest to one machine; give the module's directory relative to the manifest, e.g. "../kvredis"`},
	},
	{
		name: "unclean replace",
		src:  head + "  - name: redis\n    import: example.com/redis\n    replace: ../redis/\n",
		want: []string{`connectors.yaml:5:14: connector "redis": replace "../redis/" is not a clean path; write "../redis"`},
	},
	{
		name: "missing version",
		src:  "connectors: []\n",
		want: []string{`connectors.yaml:1:1: missing key "version"; add it, e.g. "version: 1"`},
	},
	{
		name: "version 2",
		src:  "version: 2\nconnectors: []\n",
		want: []string{"connectors.yaml:1:10: unsupported manifest version 2; this kvgen reads version 1"},
	},
	{
		name: "missing connectors",
		src:  "version: 1\npackage: connectors\n",
		want: []string{`connectors.yaml:1:1: missing key "connectors" (or "plugins"); add it, e.g. "connectors: []"`},
	},
	{
		name: "connectors without a value",
		src:  "version: 1\nconnectors:\n",
		want: []string{`connectors.yaml:2:12: connectors is empty; give a value, e.g. "connectors: []"`},
	},
	{
		name: "missing name and import",
		src:  head + "  - constructor: New\n",
		want: []string{
			`connectors.yaml:3:5: connector 1: missing key "name"; add it, e.g. "name: redis"`,
			`connectors.yaml:3:5: connector 1: missing key "import"; add it, e.g. "import: github.com/acme/kvredis"`,
		},
	},
	{
		name: "bad package names",
		src:  "version: 1\npackage: my-connectors\nconnectors: []\n",
		want: []string{`connectors.yaml:2:10: package "my-connectors" is not a Go identifier; give a package name such as "connectors"`},
	},
	{
		name: "keyword package",
		src:  "version: 1\npackage: func\nconnectors: []\n",
		want: []string{`connectors.yaml:2:10: package "func" is a Go keyword; give a package name such as "connectors"`},
	},
	{
		name: "output outside the manifest directory",
		src:  "version: 1\noutput: ../connectors_gen.go\nconnectors: []\n",
		want: []string{`connectors.yaml:2:9: output "../connectors_gen.go" is outside the manifest's directory; write the file there or below it`},
	},
	{
		name: "output not a go file",
		src:  "version: 1\noutput: gen/\nconnectors: []\n",
		want: []string{`connectors.yaml:2:9: output "gen/" is not a Go file; give a name ending in .go, e.g. "connectors_gen.go"`},
	},
	{
		name: "output a test file",
		src:  "version: 1\noutput: registry_test.go\nconnectors: []\n",
		want: []string{`connectors.yaml:2:9: output "registry_test.go" is a test file, which go build leaves out; give another name, e.g. "connectors_gen.go"`},
	},
	{
		name: "output ignored by go build",
		src:  "version: 1\noutput: gen/_registry.go\nconnectors: []\n",
		want: []string{`connectors.yaml:2:9: output "gen/_registry.go" starts with "_", so go build ignores it; give another name, e.g. "connectors_gen.go"`},
	},
	{
		name: "absolute output",
		src:  "version: 1\noutput: /tmp/connectors_gen.go\nconnectors: []\n",
		want: []string{`connectors.yaml:2:9: output "/tmp/connectors_gen.go" is an absolute path; give a file name relative to the manifest, e.g. "connectors_gen.go"`},
	},
	{
		name: "alias",
		src:  head + "  - &c {name: a, import: example.com/a}\n  - *c\n",
		want: []string{"connectors.yaml:4:5: connector 2: YAML aliases (\"*c\") are not supported in a manifest; write the value out"},
	},
	{
		name: "merge key",
		src:  head + "  - name: a\n    <<: {import: example.com/a}\n",
		want: []string{
			`connectors.yaml:3:5: connector "a": missing key "import"; add it, e.g. "import: github.com/acme/kvredis"`,
			`connectors.yaml:4:5: connector "a": YAML merge keys (<<) are not supported in a manifest; write the keys out`,
		},
	},
	{
		name: "position after multi-byte characters",
		src:  head + "  - {replace: ../ünï, name: bad name, import: example.com/a}\n",
		want: []string{`connectors.yaml:3:31: connector 1: name "bad name" cannot contain ' '; a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'`},
	},
	{
		name: "several errors in one file, in order",
		src: `version: 2
package: 3
connectors:
  - name: redis
    import: example.com/redis
    roles: [worker, gpu]
  - name: cache
    imprt: example.com/cache
    aliases: [redis]
  - name: "bad name"
    import: ../cache
    constructor: new
    version: latest
`,
		want: []string{
			"connectors.yaml:1:10: unsupported manifest version 2; this kvgen reads version 1",
			`connectors.yaml:2:10: package: want a string, got an integer; e.g. "package: connectors"`,
			`connectors.yaml:7:5: connector "cache": missing key "import"; add it, e.g. "import: github.com/acme/kvredis"`,
			`connectors.yaml:8:5: connector "cache": unknown key "imprt"; did you mean "import"?`,
			`connectors.yaml:9:15: connector "cache": alias "redis" is already the name of connector "redis" at connectors.yaml:4:11; rename one of them`,
			`connectors.yaml:10:11: connector 3: name "bad name" cannot contain ' '; a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'`,
			`connectors.yaml:11:13: connector 3: import "../cache" is not a valid Go import path: invalid path element ".."; give the package's full import path, e.g. "github.com/acme/kvredis"`,
			`connectors.yaml:12:18: connector 3: constructor "new" is lowercase: unexported functions cannot be called from the generated package; export it`,
			`connectors.yaml:13:14: connector 3: version "latest" is not a semantic version; want a version such as v1.4.0`,
		},
	},
}

func TestParseErrors(t *testing.T) {
	for _, tt := range badManifests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := Parse(file, []byte(tt.src))
			require.Error(t, err)
			var list diag.List
			require.ErrorAs(t, err, &list, "the error is a diag.List")
			assert.Equal(t, tt.want, strings.Split(err.Error(), "\n"))
			// The manifest comes back exactly when every problem is
			// within an entry, and those entries are marked.
			inEntries := true
			for _, e := range list {
				inEntries = inEntries && strings.HasPrefix(e.Msg, "connector ")
			}
			if !inEntries {
				assert.Nil(t, m, "a problem outside the entries")
				return
			}
			require.NotNil(t, m, "every problem is within an entry")
			var invalid int
			for _, c := range m.Entries {
				if c.Invalid {
					invalid++
				}
			}
			assert.Positive(t, invalid, "an entry with a problem is marked Invalid")
		})
	}
}

func TestLabel(t *testing.T) {
	named := Entry{Name: Value[string]{V: "redis", Set: true}}
	assert.Equal(t, `connector "redis"`, named.Label(0))
	assert.Equal(t, "connector 3", Entry{}.Label(2), "entries without a name are counted from 1")
	invalid := Entry{Name: Value[string]{V: "a\"b", Set: true}}
	assert.Equal(t, "connector 1", invalid.Label(0), "an invalid name is not repeated in other errors")
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "deploy.yaml")
	require.NoError(t, os.WriteFile(path, []byte("version: 1\nconnectors:\n  - name: a b\n    import: example.com/a\n"), 0o644))
	_, err := Load(path)
	require.Error(t, err)
	assert.Equal(t, path+`:3:11: connector 1: name "a b" cannot contain ' '; a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'`, err.Error())

	require.NoError(t, os.WriteFile(path, []byte("version: 1\nconnectors: []\n"), 0o644))
	m, err := Load(path)
	require.NoError(t, err)
	assert.Equal(t, path, m.File)

	_, err = Load(filepath.Join(dir, "missing.yaml"))
	assert.ErrorIs(t, err, os.ErrNotExist)
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(fullManifest))
	for _, tt := range badManifests {
		f.Add([]byte(tt.src))
	}
	f.Add([]byte("version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n\troles: [worker]\n"))
	f.Add([]byte("version: 1\rconnectors:\r  - {name: a b, import: ../x}\u2028"))
	f.Add([]byte("\uFEFFversion: 1\n---\n- *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(file, data)
		if err == nil {
			require.NotNil(t, m)
			return
		}
		var list diag.List
		require.ErrorAs(t, err, &list)
		require.NotEmpty(t, list)
		lines := 1 + bytes.Count(data, []byte("\n"))
		for _, e := range list {
			require.Equal(t, file, e.Pos.Filename, e.Msg)
			require.True(t, e.Pos.Line >= 1 && e.Pos.Line <= lines, "line %d outside 1..%d: %s", e.Pos.Line, lines, e.Msg)
			require.True(t, e.Pos.Offset >= 0 && e.Pos.Offset <= len(data), "offset %d outside the input: %s", e.Pos.Offset, e.Msg)
			before := data[:e.Pos.Offset]
			require.Equal(t, 1+bytes.Count(before, []byte("\n")), e.Pos.Line, "line agrees with offset: %s", e.Msg)
			lineStart := bytes.LastIndexByte(before, '\n')
			if lineStart < 0 && bytes.HasPrefix(before, []byte("\uFEFF")) {
				lineStart = 2 // columns count from after the byte order mark
			}
			require.Equal(t, e.Pos.Offset-lineStart, e.Pos.Column, "column agrees with offset: %s", e.Msg)
			require.NotEmpty(t, e.Msg)
		}
	})
}

func TestParseMarksInvalidEntries(t *testing.T) {
	src := `version: 1
connectors:
  - name: "bad name"
    import: example.com/a
  - name: good
    import: example.com/b
  - name: later
    import: example.com/c
    aliases: [good]
  - name: nokey
  - name: fine
    import: example.com/d
    roles: [worker]
  - name: "bad too"
    import: "bad import"
`
	m, err := Parse(file, []byte(src))
	require.Error(t, err)
	require.NotNil(t, m, "the problems are all within entries")
	var invalid, onlyNames []bool
	for _, c := range m.Entries {
		invalid = append(invalid, c.Invalid)
		onlyNames = append(onlyNames, c.OnlyNames)
	}
	assert.Equal(t, []bool{true, false, true, true, false, true}, invalid)
	// Problems with names alone leave the package and constructor to check.
	assert.Equal(t, []bool{true, false, true, false, false, false}, onlyNames)
	assert.Equal(t, "example.com/d", m.Entries[4].Import.V)
	assert.Len(t, strings.Split(err.Error(), "\n"), 5)

	// A problem outside the entries leaves no manifest to go on with.
	m, err = Parse(file, []byte("version: 1\npackage: _\n"+src[len("version: 1\n"):]))
	require.Error(t, err)
	assert.Nil(t, m)
	m, err = Parse(file, []byte("version: 2\nconnectors:\n  - name: a\n    import: example.com/a\n"))
	require.Error(t, err)
	assert.Nil(t, m)
}

// plugins: is connectors: spelt for another contract: the same entries,
// positions and problems (the key padded to the same length).
func TestPluginsIsConnectorsSpeltOtherwise(t *testing.T) {
	const entries = "  - name: headers\n    import: example.com/gateway/headers\n  - name: Bad Name\n    import: example.com/gateway/auth\n"
	asConnectors, errC := Parse(file, []byte("version: 1\nconnectors:\n"+entries))
	asPlugins, errP := Parse(file, []byte("version: 1\nplugins:   \n"+entries))
	require.Error(t, errC)
	assert.Equal(t, errC.Error(), errP.Error())
	require.Len(t, asPlugins.Entries, 2)
	assert.Equal(t, asConnectors.Entries, asPlugins.Entries)
	assert.Equal(t, "headers", asPlugins.Entries[0].Name.V)
	assert.True(t, asPlugins.Entries[1].Invalid)
}
