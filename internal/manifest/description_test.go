package manifest

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestDescription(t *testing.T) {
	src := "version: 1\nconnectors:\n" +
		"  - name: a\n    import: example.com/a\n    description: Redis, for KV that \"hosts\" share — über alles\n" +
		"  - name: b\n    import: example.com/b\n"
	m, err := Parse(file, []byte(src))
	require.NoError(t, err)
	a, b := m.Entries[0], m.Entries[1]
	assert.Equal(t, `Redis, for KV that "hosts" share — über alles`, a.Description.V)
	assert.True(t, a.Description.Set)
	assert.Equal(t, at(5, 18), noOffset(a.Description.Pos))
	assert.False(t, b.Description.Set)
	assert.Empty(t, b.Description.V)
}

// A description is one line of printable text of at most MaxDescription
// bytes; anything else is an error at its value that says what to do,
// and only its entry is left out.
func TestDescriptionErrors(t *testing.T) {
	for _, tt := range []struct{ value, want string }{
		{`"two\nlines"`, `connectors.yaml:6:18: connector "a": description is more than one line (a U+000A breaks it); say in one line what the connector is for, and leave the rest to its package's documentation`},
		{"|\n      one\n      two", `connectors.yaml:6:18: connector "a": description is more than one line (a U+000A breaks it); say in one line`},
		{`"a\rb"`, `(a U+000D breaks it)`},
		{`"a\u2028b"`, `(a U+2028 breaks it)`},
		{`"a\u0085b"`, `(a U+0085 breaks it)`},
		{`"tab\there"`, `connectors.yaml:6:18: connector "a": description contains a control character (U+0009); remove it`},
		{`"bell\a"`, `description contains a control character (U+0007); remove it`},
		{`"abc\u202Edef"`, `description contains U+202E, a bidirectional-text control, which makes text read differently from what it is; remove it`},
		{strings.Repeat("x", MaxDescription+1), `connectors.yaml:6:18: connector "a": description is 201 bytes; kvgen takes at most 200: say in one line what the connector is for, and leave the rest to its package's documentation`},
		{strings.Repeat("é", MaxDescription/2) + "x", `description is 201 bytes; kvgen takes at most 200`},
		{`""`, `connectors.yaml:6:18: connector "a": description is empty; give a value, e.g. "description: Redis, for KV that hosts share", or leave the key out`},
		{`[a, b]`, `connectors.yaml:6:18: connector "a": description: want a string, got a list`},
	} {
		src := "version: 1\nconnectors:\n  - name: ok\n    import: example.com/ok\n  - name: a\n    description: " + tt.value + "\n    import: example.com/a\n"
		m, err := Parse(file, []byte(src))
		require.Error(t, err, "%q", tt.value)
		assert.Contains(t, err.Error(), tt.want, "%q", tt.value)
		assert.NotContains(t, err.Error(), "\n", "one problem")
		require.NotNil(t, m, "only the entry is left out")
		assert.False(t, m.Entries[0].Invalid)
		assert.True(t, m.Entries[1].Invalid)
	}
	for _, ok := range []string{strings.Repeat("x", MaxDescription), strings.Repeat("é", MaxDescription/2), "plain, with a 'quote' and a \\ and €"} {
		src := "version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n    description: " + strconvQuote(ok) + "\n"
		m, err := Parse(file, []byte(src))
		require.NoError(t, err, "%q", ok)
		assert.Equal(t, ok, m.Entries[0].Description.V)
	}
}

// The schema publishes the description's rules: its pattern refuses the
// characters Parse refuses (a Go regexp spells \uXXXX as \x{XXXX}), and
// its maxLength is MaxDescription.
func TestDescriptionSchema(t *testing.T) {
	s := loadSchema(t)
	p := s.Properties["connectors"].Items.Properties["description"]
	require.NotNil(t, p)
	assert.Equal(t, "string", p.Type)
	assert.Contains(t, string(Schema()), `"maxLength": 200`)
	re := regexp.MustCompile(regexp.MustCompile(`\\u([0-9a-fA-F]{4})`).ReplaceAllString(p.Pattern, `\x{$1}`))
	for r := rune(0); r < 0x2100; r++ {
		// Escaped, as a literal line break in YAML would fold into a space.
		value := "a" + string(r) + "b"
		src := "version: 1\nconnectors:\n  - name: a\n    import: example.com/a\n    description: " + fmt.Sprintf(`"a\u%04Xb"`, r) + "\n"
		_, err := Parse(file, []byte(src))
		if !assert.Equal(t, err == nil, re.MatchString(value), "%U: %v", r, err) {
			break
		}
	}
}

// A manifest that extends another keeps its entries' descriptions; a pin
// sets a version or a replacement only, so it cannot change one, and
// says which keys it takes.
func TestExtendsKeepsDescriptions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
	}
	write("go.mod", "module example.com/m\n")
	write("connectors.yaml", "version: 1\nconnectors:\n  - {name: a, import: example.com/a, description: the base's a}\n  - {name: b, import: example.com/b}\n")
	write("edge.yaml", "version: 1\nextends: connectors.yaml\npin:\n  - {name: a, version: v1.2.3}\nconnectors:\n  - {name: c, import: example.com/c, description: the edge's c}\n")
	m, err := LoadIn(dir, "edge.yaml")
	require.NoError(t, err)
	var got []string
	for _, c := range m.Entries {
		got = append(got, c.Name.V+": "+c.Description.V)
	}
	assert.Equal(t, []string{"a: the base's a", "b: ", "c: the edge's c"}, got)
	assert.Equal(t, "connectors.yaml", m.Entries[0].Description.Pos.Filename)

	write("edge.yaml", "version: 1\nextends: connectors.yaml\npin:\n  - {name: a, description: another}\n")
	_, err = LoadIn(dir, "edge.yaml")
	require.Error(t, err)
	assert.Equal(t, `edge.yaml:4:15: pin "a": unknown key "description"; the keys are name, version, replace`, err.Error())

	// A bad description in an extending manifest leaves out its entry
	// alone, even where it ends the entry.
	write("edge.yaml", "version: 1\nextends: connectors.yaml\nconnectors:\n  - name: c\n    import: example.com/c\n    description: \"x\\ny\"\n")
	m, err = LoadIn(dir, "edge.yaml")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `edge.yaml:6:18: connector "c": description is more than one line`)
	require.NotNil(t, m)
	require.Len(t, m.Entries, 3)
	assert.True(t, m.Entries[2].Invalid)
}
