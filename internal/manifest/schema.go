package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// schemaDialect is the JSON Schema draft that Schema follows.
const schemaDialect = "https://json-schema.org/draft/2020-12/schema"

// schema is a JSON Schema, with only the keywords the manifest needs. Field
// order is output order, so the document reads top-down.
type schema struct {
	Dialect              string     `json:"$schema,omitempty"`
	Title                string     `json:"title,omitempty"`
	Description          string     `json:"description,omitempty"`
	Type                 string     `json:"type,omitempty"`
	Const                any        `json:"const,omitempty"`
	Enum                 []string   `json:"enum,omitempty"`
	MinLength            int        `json:"minLength,omitempty"`
	MaxLength            int        `json:"maxLength,omitempty"`
	Pattern              string     `json:"pattern,omitempty"`
	Default              any        `json:"default,omitempty"`
	Examples             []any      `json:"examples,omitempty"`
	Items                *schema    `json:"items,omitempty"`
	MinItems             int        `json:"minItems,omitempty"`
	MaxItems             int        `json:"maxItems,omitempty"`
	UniqueItems          bool       `json:"uniqueItems,omitempty"`
	Properties           properties `json:"properties,omitempty"`
	Required             []string   `json:"required,omitempty"`
	AnyOf                []*schema  `json:"anyOf,omitempty"`
	Not                  *schema    `json:"not,omitempty"`
	AdditionalProperties *bool      `json:"additionalProperties,omitempty"`
}

// properties keeps the keys in struct order, where a map would sort them.
type properties []property

type property struct {
	name   string
	schema *schema
}

func (ps properties) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		if err := encode(&b, p.name); err != nil {
			return nil, err
		}
		b.WriteByte(':')
		if err := encode(&b, p.schema); err != nil {
			return nil, err
		}
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// encode writes v as JSON without escaping <, > and &, which descriptions
// may hold and which are not HTML here.
func encode(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	b.Truncate(b.Len() - 1) // Encode's newline
	return nil
}

// Schema returns the JSON Schema (draft 2020-12) of the manifest, as
// indented JSON with a trailing newline. It is derived from the same struct
// types the parser reads keys from, so it lists exactly the keys Parse
// accepts; its output is the same on every call.
func Schema() []byte {
	root := objectSchema(reflect.TypeFor[fileV1]())
	root.Dialect = schemaDialect
	root.Title = "kvgen connectors.yaml"
	root.Description = "The connectors that kvgen links into a Go binary, version " + strconv.Itoa(formatVersion) + "."
	for _, p := range root.Properties {
		if p.name == "version" {
			p.schema.Const = formatVersion
		}
	}
	var b bytes.Buffer
	if err := encode(&b, root); err != nil {
		panic("manifest: encoding the schema: " + err.Error())
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b.Bytes(), "", "  "); err != nil {
		panic("manifest: indenting the schema: " + err.Error())
	}
	out.WriteByte('\n')
	return out.Bytes()
}

// objectSchema describes the mapping that struct type t defines.
func objectSchema(t reflect.Type) *schema {
	s := &schema{Type: "object", AdditionalProperties: new(bool)}
	for _, f := range fields(t) {
		ps := fieldSchema(f.typ)
		ps.Description = f.doc
		if f.def != "" {
			ps.Default = exampleValue(f.def)
		}
		if f.example != "" {
			ps.Examples = []any{exampleValue(f.example)}
		}
		// A list's pattern and length limit apply to its items.
		str := ps
		if ps.Items != nil {
			str = ps.Items
		}
		str.Pattern, str.MaxLength = f.pattern, f.maxLen
		if str.Pattern == "" && str.Type == "string" {
			str.Pattern = patterns[f.key]
		}
		ps.MinItems = f.minItems
		ps.MaxItems = f.maxItems
		ps.UniqueItems = f.unique
		s.Properties = append(s.Properties, property{f.key, ps})
		switch {
		case f.spells != "":
			// Either spelling will do, but not both.
			s.Not = &schema{Required: []string{f.spells, f.key}}
		case f.required && f.unless != "":
			// One of the keys must be given.
			s.AnyOf = append(s.AnyOf, &schema{Required: []string{f.key}}, &schema{Required: []string{f.unless}})
		case f.required:
			s.Required = append(s.Required, f.key)
		}
	}
	for _, f := range fields(t) {
		if f.spells != "" && s.AnyOf != nil {
			s.AnyOf = append(s.AnyOf, &schema{Required: []string{f.key}})
		}
	}
	return s
}

// fieldSchema describes a value of Go type t.
func fieldSchema(t reflect.Type) *schema {
	if v, ok := reflect.New(t).Interface().(scalar); ok {
		return v.schema()
	}
	switch t.Kind() {
	case reflect.Slice:
		return &schema{Type: "array", Items: fieldSchema(t.Elem())}
	case reflect.Struct:
		return objectSchema(t)
	}
	panic("manifest: no schema for " + t.String())
}

func (v *Value[T]) schema() *schema {
	switch any(v.V).(type) {
	case string:
		return &schema{Type: "string", MinLength: 1}
	case int:
		return &schema{Type: "integer"}
	}
	panic(fmt.Sprintf("manifest: no schema for %T", v.V))
}

// exampleValue turns a value written in YAML in a tag into its JSON value.
func exampleValue(s string) any {
	var v any
	if err := yaml.Unmarshal([]byte(s), &v); err != nil {
		panic("manifest: bad value in a tag: " + s)
	}
	return v
}
