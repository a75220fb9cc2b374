package manifest

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// jsonSchema is the part of a JSON Schema document the tests read.
type jsonSchema struct {
	Dialect              string                 `json:"$schema"`
	Type                 string                 `json:"type"`
	Description          string                 `json:"description"`
	Properties           map[string]*jsonSchema `json:"properties"`
	Required             []string               `json:"required"`
	AnyOf                []*jsonSchema          `json:"anyOf"`
	Not                  *jsonSchema            `json:"not"`
	AdditionalProperties *bool                  `json:"additionalProperties"`
	Items                *jsonSchema            `json:"items"`
	Enum                 []string               `json:"enum"`
	Pattern              string                 `json:"pattern"`
	Const                any                    `json:"const"`
	Default              any                    `json:"default"`
	Examples             []any                  `json:"examples"`
	MinItems             int                    `json:"minItems"`
	UniqueItems          bool                   `json:"uniqueItems"`
}

func loadSchema(t *testing.T) *jsonSchema {
	t.Helper()
	var s jsonSchema
	require.NoError(t, json.Unmarshal(Schema(), &s))
	return &s
}

func propertyNames(s *jsonSchema) []string {
	var out []string
	for k := range s.Properties {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// acceptedKeys asks the parser which keys it accepts, through the list its
// unknown-key error gives.
func acceptedKeys(t *testing.T, src string) []string {
	t.Helper()
	_, err := Parse(file, []byte(src))
	require.Error(t, err)
	_, list, ok := strings.Cut(err.Error(), "the keys are ")
	require.True(t, ok, "error lists the keys: %v", err)
	out := strings.Split(strings.SplitN(list, "\n", 2)[0], ", ")
	slices.Sort(out)
	return out
}

func TestSchemaListsTheKeysTheParserAccepts(t *testing.T) {
	s := loadSchema(t)
	assert.Equal(t, "https://json-schema.org/draft/2020-12/schema", s.Dialect)
	assert.Equal(t, "object", s.Type)

	top := acceptedKeys(t, "version: 1\nconnectors: []\nzzzzzzzz: 1\n")
	assert.Equal(t, top, propertyNames(s))

	conn := s.Properties["connectors"]
	require.NotNil(t, conn)
	assert.Equal(t, "array", conn.Type)
	require.NotNil(t, conn.Items)
	entry := acceptedKeys(t, "version: 1\nconnectors:\n  - {name: a, import: example.com/a, zzzzzzzz: 1}\n")
	assert.Equal(t, entry, propertyNames(conn.Items))

	for _, obj := range []*jsonSchema{s, conn.Items} {
		require.NotNil(t, obj.AdditionalProperties)
		assert.False(t, *obj.AdditionalProperties, "unknown keys are rejected, as the parser does")
		for k, p := range obj.Properties {
			assert.NotEmpty(t, p.Description, "key %q is documented", k)
		}
	}
	// connectors, or its other spelling plugins, may be left out only by
	// a manifest that extends another; not both spellings are given.
	assert.Equal(t, []string{"version"}, s.Required)
	require.Len(t, s.AnyOf, 3)
	assert.Equal(t, []string{"connectors"}, s.AnyOf[0].Required)
	assert.Equal(t, []string{"extends"}, s.AnyOf[1].Required)
	assert.Equal(t, []string{"plugins"}, s.AnyOf[2].Required)
	require.NotNil(t, s.Not)
	assert.Equal(t, []string{"connectors", "plugins"}, s.Not.Required)
	require.NotNil(t, s.Properties["plugins"])
	assert.Equal(t, conn.Items, s.Properties["plugins"].Items, "plugins: lists what connectors: does")
	assert.Equal(t, []string{"name", "import"}, conn.Items.Required)
}

func TestSchemaExamplesParse(t *testing.T) {
	// A manifest that uses every key with the schema's example value is valid.
	s := loadSchema(t)
	example := func(p *jsonSchema) any {
		require.NotEmpty(t, p.Examples)
		return p.Examples[0]
	}
	entry := map[string]any{}
	for k, p := range s.Properties["connectors"].Items.Properties {
		entry[k] = example(p)
	}
	doc := map[string]any{}
	for k, p := range s.Properties {
		doc[k] = example(p)
	}
	doc["connectors"] = []any{entry}
	delete(doc, "plugins") // another spelling of connectors:
	// Parsed without factory: first, then with it and without roles:.
	factory := doc["factory"]
	delete(doc, "factory")
	data, err := yaml.Marshal(doc)
	require.NoError(t, err)
	m, err := Parse(file, data)
	require.NoError(t, err, "%s", data)
	require.Len(t, m.Entries, 1)
	c := m.Entries[0]
	for _, set := range []bool{m.Version.Set, m.Package.Set, m.Output.Set, c.Name.Set, c.Import.Set, c.Constructor.Set, c.Description.Set, c.Version.Set, c.Replace.Set} {
		assert.True(t, set)
	}
	assert.NotEmpty(t, c.Roles)
	assert.NotEmpty(t, c.Aliases)

	doc["factory"] = factory
	delete(entry, "roles")
	data, err = yaml.Marshal(doc)
	require.NoError(t, err)
	m, err = Parse(file, data)
	require.NoError(t, err, "%s", data)
	path, name, ok := m.Contract()
	assert.True(t, ok)
	assert.Equal(t, factory, path+"."+name)
}

func TestSchemaConstraints(t *testing.T) {
	s := loadSchema(t)
	assert.EqualValues(t, 1, s.Properties["version"].Const)
	assert.Equal(t, "integer", s.Properties["version"].Type)

	m, err := Parse(file, []byte("version: 1\nconnectors: []\n"))
	require.NoError(t, err)
	assert.Equal(t, m.Output.V, s.Properties["output"].Default, "the schema's default is the parser's")

	c := s.Properties["connectors"].Items.Properties
	assert.Empty(t, c["roles"].Items.Enum, "the roles are the contract's, which gen checks")
	assert.Equal(t, 1, c["roles"].MinItems)
	assert.True(t, c["roles"].UniqueItems)
	assert.True(t, c["aliases"].UniqueItems)

	// The name pattern is the one the parser enforces, for names and aliases.
	require.NotEmpty(t, c["name"].Pattern)
	assert.Equal(t, c["name"].Pattern, c["aliases"].Items.Pattern)
	re := regexp.MustCompile(c["name"].Pattern)
	for _, name := range []string{"LMCacheConnectorV1", "redis", "a.b_c-d", "3fs", "a b", `a"b`, "a\nb", "a*/", "é"} {
		src := "version: 1\nconnectors:\n  - name: " + strconvQuote(name) + "\n    import: example.com/a\n"
		_, err := Parse(file, []byte(src))
		assert.Equal(t, re.MatchString(name), err == nil, "name %q: %v", name, err)
	}
}

// strconvQuote quotes s as a YAML double-quoted scalar, whose escapes
// include JSON's.
func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestSchemaOutput(t *testing.T) {
	a, b := Schema(), Schema()
	assert.Equal(t, a, b, "the same schema on every call")
	assert.True(t, json.Valid(a))
	assert.True(t, strings.HasPrefix(string(a), "{\n  \"$schema\": "), "indented, $schema first")
	assert.True(t, strings.HasSuffix(string(a), "}\n"), "ends with a newline")
	a[0] = 'x'
	assert.Equal(t, byte('{'), Schema()[0], "callers cannot change later results")
}
