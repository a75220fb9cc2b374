package manifest

import (
	"fmt"
	"go/token"
	"reflect"
	"strconv"
	"strings"
	"sync"

	"github.com/kvgen/kvgen/internal/names"
)

// formatVersion is the manifest version this package reads.
const formatVersion = 1

// fileV1, pinV1 and Entry define the keys of a version 1 manifest. The
// parser accepts exactly their tagged fields and Schema describes exactly
// them. Tags:
//
//	yaml     the key
//	doc      its description in the schema
//	required "true" when the key must be present
//	unless   a key whose presence makes a required key optional
//	spells   a key this one is another spelling of: a manifest gives one
//	         of the two, which the parser then treats alike
//	default  the value an absent key takes
//	example  a value shown in error messages and in the schema
//	minItems the least number of items a list given must hold
//	maxItems the most items a list may hold
//	unique   "true" when a list may not hold a value twice
//	name     "true": a string follows the name rule of internal/names
//	pattern  the regular expression a string must match
//	maxLength the most bytes a string may hold
type fileV1 struct {
	Version    Value[int]      `yaml:"version" required:"true" example:"1" doc:"Manifest format version; this kvgen reads version 1."`
	Factory    Value[string]   `yaml:"factory" maxLength:"1024" example:"example.com/gateway/plugin.Factory" doc:"The contract every constructor must fit: IMPORT/PATH.TypeName of a named function type, which constructors must be assignable to, or of a named interface, which constructors taking no arguments return. Default: the KV connector contract, github.com/kvgen/kvgen/registry/kv.Factory."`
	Package    Value[string]   `yaml:"package" example:"connectors" doc:"Go package name of the generated file. Default: the package of the output directory."`
	Output     Value[string]   `yaml:"output" default:"connectors_gen.go" example:"connectors_gen.go" doc:"The generated Go file, relative to the manifest's directory and inside it."`
	Extends    Value[string]   `yaml:"extends" example:"../connectors.yaml" doc:"A manifest this one builds on, relative to this one: its connectors, less those dropped, with versions and replacements pinned here, and then this manifest's own."`
	Drop       []Value[string] `yaml:"drop" unique:"true" name:"true" maxItems:"10000" example:"[memory]" doc:"Names of connectors of the extended manifest to leave out."`
	Pin        []pinV1         `yaml:"pin" maxItems:"10000" example:"[{name: redis, version: v0.2.0}]" doc:"Connectors of the extended manifest whose module version or local replacement this manifest sets."`
	Connectors []Entry         `yaml:"connectors" required:"true" unless:"extends" maxItems:"10000" example:"[]" doc:"The connectors linked into the binary, in registry order; an empty list links none. At most 10000: compiling the registry costs time and memory in proportion to its entries."`
	Plugins    []Entry         `yaml:"plugins" spells:"connectors" maxItems:"10000" example:"[]" doc:"Another spelling of connectors:, which reads better for a contract other than the KV connectors': the plugins linked into the binary, in registry order. A manifest gives one of the two."`
}

// pinV1 sets the version: or replace: of a connector an extended manifest
// lists.
type pinV1 struct {
	Pos     token.Position `yaml:"-"`
	Name    Value[string]  `yaml:"name" required:"true" name:"true" example:"redis" doc:"Name of a connector of the extended manifest."`
	Version Value[string]  `yaml:"version" maxLength:"256" example:"v1.4.0" doc:"Least version of the connector's module to require instead."`
	Replace Value[string]  `yaml:"replace" maxLength:"4096" example:"../kvredis" doc:"Local directory of the connector's module instead, relative to this manifest."`
}

// label names the pin in errors.
func (c pinV1) label(index int) string {
	if c.Name.Set && validName(c.Name.V) {
		return fmt.Sprintf("pin %q", c.Name.V)
	}
	return fmt.Sprintf("pin %d", index+1)
}

// label names the entry in errors; see Entry.Label.
func (c Entry) label(index int) string { return c.Label(index) }

// labeler is implemented by list items whose errors name the item.
type labeler interface{ label(index int) string }

// field is one key of a manifest mapping, read from a struct field's tags.
type field struct {
	key      string
	index    int
	typ      reflect.Type
	doc      string
	required bool
	unless   string
	spells   string
	def      string
	example  string
	minItems int
	maxItems int
	unique   bool
	pattern  string
	maxLen   int
	name     bool // follows the name rule, which validate checks with its length
}

// fieldCache holds fields' results: the parser asks for every key it
// reads, and reading tags each time dominated parsing large manifests.
var fieldCache sync.Map // reflect.Type -> []field

// fields returns the keys of the mapping that struct type t defines, in
// declaration order. The result is shared and must not be modified.
func fields(t reflect.Type) []field {
	if f, ok := fieldCache.Load(t); ok {
		return f.([]field)
	}
	f := tagFields(t)
	fieldCache.Store(t, f)
	return f
}

func tagFields(t reflect.Type) []field {
	var out []field
	for i := range t.NumField() {
		sf := t.Field(i)
		key, _, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if key == "" || key == "-" {
			continue
		}
		f := field{
			key:      key,
			index:    i,
			typ:      sf.Type,
			doc:      sf.Tag.Get("doc"),
			required: sf.Tag.Get("required") == "true",
			unless:   sf.Tag.Get("unless"),
			spells:   sf.Tag.Get("spells"),
			def:      sf.Tag.Get("default"),
			example:  sf.Tag.Get("example"),
			unique:   sf.Tag.Get("unique") == "true",
			pattern:  sf.Tag.Get("pattern"),
		}
		if sf.Tag.Get("name") == "true" {
			f.pattern, f.maxLen, f.name = names.Pattern, names.MaxLen, true
		}
		for tag, dst := range map[string]*int{"minItems": &f.minItems, "maxItems": &f.maxItems, "maxLength": &f.maxLen} {
			if s := sf.Tag.Get(tag); s != "" {
				n, err := strconv.Atoi(s)
				if err != nil {
					panic("manifest: bad " + tag + " tag on " + t.Name() + "." + sf.Name)
				}
				*dst = n
			}
		}
		out = append(out, f)
	}
	return out
}

// keys returns the keys of the mapping that struct type t defines.
func keys(t reflect.Type) []string {
	var out []string
	for _, f := range fields(t) {
		out = append(out, f.key)
	}
	return out
}

// fieldByKey returns the field of struct type t for key.
func fieldByKey(t reflect.Type, key string) (field, bool) {
	for _, f := range fields(t) {
		if f.key == key {
			return f, true
		}
	}
	return field{}, false
}
