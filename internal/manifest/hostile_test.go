package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/names"
	"github.com/kvgen/kvgen/internal/problemcap"
)

// An output name that could hide what it is, break out of a comment or a
// string, or split a line is an error at its position.
func TestOutputMustBeAPlainFileName(t *testing.T) {
	cases := map[string]struct {
		yaml string // the output: value as written in YAML
		want string // the message after the position
	}{
		"right-to-left override": {`"gen\u202Eog.go"`,
			`output "gen\u202eog.go" contains U+202E, a bidirectional-text control, which makes a name read differently from what it is; give a plain file name, e.g. "connectors_gen.go"`},
		"left-to-right isolate in a directory": {`"a\u2066b/x.go"`,
			`output "a\u2066b/x.go" contains U+2066, a bidirectional-text control, which makes a name read differently from what it is; give a plain file name, e.g. "connectors_gen.go"`},
		"newline": {`"x\npackage evil.go"`,
			`output "x\npackage evil.go" contains a control character (U+000A); give a plain file name, e.g. "connectors_gen.go"`},
		"escape": {`"x\e[31m.go"`,
			`output "x\x1b[31m.go" contains a control character (U+001B); give a plain file name, e.g. "connectors_gen.go"`},
		"double quote": {`'x".go'`,
			`output "x\".go" contains '"'; give a plain file name, e.g. "connectors_gen.go"`},
		"single quote": {`"x'.go"`,
			`output "x'.go" contains '\''; give a plain file name, e.g. "connectors_gen.go"`},
		"backquote": {"x`.go",
			"output \"x`.go\" contains '`'; give a plain file name, e.g. \"connectors_gen.go\""},
		"end of comment": {`"x*/.go"`,
			`output "x*/.go" contains '*'; give a plain file name, e.g. "connectors_gen.go"`},
		"windows device name": {`"gen/con.go"`,
			`output "gen/con.go" is not a plain file path: "con" disallowed as path element component on Windows; give a name such as "connectors_gen.go"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			m, err := Parse(file, []byte("version: 1\noutput: "+tc.yaml+"\nconnectors: []\n"))
			require.Error(t, err)
			assert.Nil(t, m)
			assert.Equal(t, "connectors.yaml:2:9: "+tc.want, err.Error())
		})
	}
}

func TestCheckFileName(t *testing.T) {
	assert.Empty(t, CheckFileName("-o", "gen/registry_gen.go"))
	assert.Empty(t, CheckFileName("-o", "/abs/dir/registry_gen.go"), "directories of -o are the caller's")
	assert.Equal(t, `-o "/abs/r\u202egen.go" contains U+202E, a bidirectional-text control, which makes a name read differently from what it is; give a plain file name, e.g. "connectors_gen.go"`,
		CheckFileName("-o", "/abs/r\u202egen.go"))
	assert.Equal(t, `-o "x/gen" is not a Go file; give a name ending in .go, e.g. "connectors_gen.go"`, CheckFileName("-o", "x/gen"))
}

func TestNameLengthIsCapped(t *testing.T) {
	ok := "A" + strings.Repeat("b", names.MaxLen-1)
	long := ok + "c"
	src := "version: 1\nconnectors:\n  - name: " + ok + "\n    import: example.com/a\n" +
		"  - name: " + long + "\n    import: example.com/b\n    aliases: [" + long + "x]\n"
	_, err := Parse(file, []byte(src))
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2, err.Error())
	shown := `"` + long[:64] + `"...`
	assert.Equal(t, `connectors.yaml:5:11: connector 2: name `+shown+` (129 bytes) is longer than 128 bytes; give a shorter name`, lines[0])
	assert.Equal(t, `connectors.yaml:7:15: connector 2: alias `+shown+` (130 bytes) is longer than 128 bytes; give a shorter name`, lines[1])
	assert.Contains(t, string(Schema()), `"maxLength": 128`, "the schema publishes the limit")
}

// A long unknown key is named by its first bytes and its length, and the
// error line stays short.
func TestLongUnknownKeyIsShortened(t *testing.T) {
	key := strings.Repeat("k", 900<<10)
	// An explicit key ("? "): YAML limits implicit keys to 1024 characters.
	_, err := Parse(file, []byte("version: 1\nconnectors: []\n? "+key+"\n: 1\n"))
	require.Error(t, err)
	assert.Equal(t, `connectors.yaml:3:3: unknown key "`+key[:64]+`"... (921600 bytes); the keys are version, factory, package, output, extends, drop, pin, connectors, plugins`, err.Error())
}

func TestManifestSizeIsCapped(t *testing.T) {
	big := []byte("version: 1\nconnectors: []\n# " + strings.Repeat("x", MaxSize) + "\n")
	m, err := Parse(file, big)
	require.Error(t, err)
	assert.Nil(t, m)
	var d *diag.Error
	require.ErrorAs(t, err, &d)
	assert.Equal(t, file, d.Pos.Filename)
	assert.Contains(t, err.Error(), "the manifest is 1048605 bytes; kvgen reads manifests of up to 1048576 bytes")

	// Load refuses a large file after reading no more than MaxSize+1
	// bytes of it.
	path := filepath.Join(t.TempDir(), "connectors.yaml")
	f, err := os.Create(path)
	require.NoError(t, err)
	require.NoError(t, f.Truncate(50<<20))
	require.NoError(t, f.Close())
	_, err = Load(path)
	require.Error(t, err)
	assert.Contains(t, err.Error(), path+": the manifest is 52428800 bytes; kvgen reads manifests of up to 1048576 bytes (1 MiB): is this the right file?")

	// A manifest of exactly MaxSize is read.
	ok := []byte("version: 1\nconnectors: []\n#")
	ok = append(ok, []byte(strings.Repeat("x", MaxSize-len(ok)-1)+"\n")...)
	require.Len(t, ok, MaxSize)
	_, err = Parse(file, ok)
	require.NoError(t, err)
}

func TestLoadRefusesWhatIsNotAFile(t *testing.T) {
	_, err := Load(t.TempDir())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "is not a regular file")
}

// go build reads a name ending in a GOOS or GOARCH as a build constraint:
// a registry written there is missing from the package on every other
// system, so such a name is refused, with the part that restricts it.
func TestOutputMustBuildOnEverySystem(t *testing.T) {
	refused := map[string]string{
		"srv/x_windows.go":        `"_windows"`,
		"x_arm64.go":              `"_arm64"`,
		"x_linux_amd64.go":        `"_linux_amd64"`,
		"gen/reg_wasip1.go":       `"_wasip1"`,
		"a_b_darwin_arm64.go":     `"_darwin_arm64"`,
		"connectors_js_gen_js.go": `"_js"`,
	}
	for out, suffix := range refused {
		t.Run(out, func(t *testing.T) {
			m, err := Parse(file, []byte("version: 1\noutput: "+out+"\nconnectors: []\n"))
			require.Error(t, err)
			assert.Nil(t, m)
			assert.Equal(t, `connectors.yaml:2:9: output "`+out+`" ends in `+suffix+`, a GOOS or GOARCH name, so go build compiles it only for that system and the package lacks Registry everywhere else; give another name, e.g. "connectors_gen.go"`, err.Error())
		})
	}
	for _, out := range []string{"windows.go", "x_unix.go", "x_windows_gen.go", "amd64/x.go", "x_amd64x.go"} {
		_, err := Parse(file, []byte("version: 1\noutput: "+out+"\nconnectors: []\n"))
		assert.NoError(t, err, out)
	}
	assert.Equal(t, `-o "srv/x_windows.go" ends in "_windows", a GOOS or GOARCH name, so go build compiles it only for that system and the package lacks Registry everywhere else; give another name, e.g. "connectors_gen.go"`,
		CheckFileName("-o", "srv/x_windows.go"))
	assert.Contains(t, CheckFileName("-o", "srv/x_test.go"), "is a test file")
	assert.Contains(t, CheckFileName("-o", "srv/_x.go"), `starts with "_"`)
	assert.Contains(t, CheckFileName("-o", "srv/.x.go"), `starts with "."`)
}

// 50,000 unknown keys are ten lines and a count, not 5 MB; the ten shown
// keep their suggestions, and a second document, found first, takes no
// place from them.
func TestManyProblemsShowTheFirstTen(t *testing.T) {
	var b strings.Builder
	b.WriteString("version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n")
	for i := range 50000 {
		fmt.Fprintf(&b, "    importt%d: x\n", i)
	}
	b.WriteString("---\nversion: 1\n")
	require.Less(t, b.Len(), MaxSize)
	_, err := Parse(file, []byte(b.String()))
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, problemcap.Max+1)
	for i, l := range lines[:problemcap.Max] {
		assert.Equal(t, fmt.Sprintf(`connectors.yaml:%d:5: connector "a": unknown key "importt%d"; did you mean "import"?`, 5+i, i), l)
	}
	assert.Equal(t, "... and 49991 more problems", lines[problemcap.Max])
	assert.Less(t, len(err.Error()), 2000)
}

// A registry's compilation costs time and memory in proportion to its
// entries: past 10,000 the manifest is refused at the list, before any
// entry is decoded, and the schema publishes the limit.
func TestConnectorsAreAtMostTenThousand(t *testing.T) {
	manifest := func(n int) []byte {
		var b strings.Builder
		b.WriteString("version: 1\nconnectors:\n")
		for i := range n {
			fmt.Fprintf(&b, "  - {name: c%d, import: a/c%d}\n", i, i)
		}
		return []byte(b.String())
	}
	m, err := Parse(file, manifest(10000))
	require.NoError(t, err)
	assert.Len(t, m.Entries, 10000)

	m, err = Parse(file, manifest(10001))
	assert.Nil(t, m)
	assert.EqualError(t, err, "connectors.yaml:3:3: connectors lists 10001 items; kvgen takes at most 10000")
	assert.Contains(t, string(Schema()), `"maxItems": 10000`)
}
