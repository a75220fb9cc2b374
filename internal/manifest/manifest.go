// Package manifest reads connectors.yaml, the list of connectors a
// deployment links, and checks it strictly: every problem is reported at its
// file:line:col, all of them in one run.
//
// The keys the parser accepts and the JSON Schema it publishes are both
// derived from the same Go struct types, so the two cannot disagree.
package manifest

import (
	"errors"
	"fmt"
	"go/token"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/kvgen/kvgen/internal/diag"
)

// Value is a manifest value with the position it was written at. Set is
// false when the key was absent: then V holds the default and Pos is the
// zero position.
type Value[T any] struct {
	V   T
	Pos token.Position
	Set bool
}

// MaxDescription is the most bytes a description: may hold: a line that
// says what a connector is for, as a listing's column shows it.
const MaxDescription = 200

// Text is the value of description:, one line of printable text. It
// decodes as a Value[string] does and then refuses what would break a
// listing's line or make it read as something else: a line break,
// another control character, a bidirectional-text control, or more than
// MaxDescription bytes.
type Text struct{ Value[string] }

func (t *Text) decode(n *yaml.Node, pos token.Position) (want, msg string) {
	if want, msg = t.Value.decode(n, pos); want != "" || msg != "" {
		return want, msg
	}
	const advice = "say in one line what the connector is for, and leave the rest to its package's documentation"
	for _, r := range t.V {
		switch {
		case r == '\n' || r == '\r' || r == '\u0085' || r == '\u2028' || r == '\u2029':
			return "", fmt.Sprintf("description is more than one line (a %U breaks it); %s", r, advice)
		case unicode.IsControl(r):
			return "", fmt.Sprintf("description contains a control character (%U); remove it", r)
		case unicode.Is(unicode.Bidi_Control, r):
			return "", fmt.Sprintf("description contains %U, a bidirectional-text control, which makes text read differently from what it is; remove it", r)
		}
	}
	if len(t.V) > MaxDescription {
		return "", fmt.Sprintf("description is %d bytes; kvgen takes at most %d: %s", len(t.V), MaxDescription, advice)
	}
	return "", ""
}

// Manifest is a parsed connectors.yaml.
type Manifest struct {
	// File is the file name as given to Parse; every position uses it.
	File    string
	Version Value[int]
	// Factory names the contract every constructor must fit, as
	// IMPORT/PATH.TypeName; when absent, the contract is the KV
	// connector's kv.Factory. See [Manifest.Contract].
	Factory Value[string]
	// Package is the package of the generated file. When absent, gen uses
	// the package of the output directory.
	Package Value[string]
	// Output is the generated file, relative to the manifest's directory;
	// it defaults to connectors_gen.go.
	Output Value[string]
	// Extends is the manifest this one extends, relative to it; LoadIn
	// merges that manifest's connectors (less those dropped, with the
	// pins applied) into Entries, ahead of this one's own.
	Extends Value[string]
	// Entries are the items of its connectors: list, in registry order.
	Entries []Entry
	// SHA256 is the hex SHA-256 of the manifest's bytes, or, when it
	// extends another, of its bytes and the other's SHA256: what names
	// its content, in a binary and in listings.
	SHA256 string

	drop []Value[string]
	pin  []pinV1
}

// Contract returns the import path and type name that factory: names, or
// ok false when the manifest names none and the contract is the KV
// connector's.
func (m *Manifest) Contract() (path, name string, ok bool) {
	if !m.Factory.Set {
		return "", "", false
	}
	path, name, ok = splitFactory(m.Factory.V)
	return path, name, ok
}

// OutputPos is where problems with the output package point: the
// package: key, else output:, else the manifest's first line.
func (m *Manifest) OutputPos() token.Position {
	switch {
	case m.Package.Set:
		return m.Package.Pos
	case m.Output.Set:
		return m.Output.Pos
	}
	return token.Position{Filename: m.File, Line: 1, Column: 1}
}

// ImportPaths lists the import paths of the entries that have no problem
// reported yet, or only problems with their names: those to load.
func (m *Manifest) ImportPaths() []string {
	paths := make([]string, 0, len(m.Entries))
	for _, c := range m.Entries {
		if !c.Invalid || c.OnlyNames {
			paths = append(paths, c.Import.V)
		}
	}
	return paths
}

// ParseFactory checks a factory: value given elsewhere, such as on a
// command line, as the manifest checks its own, and splits it into the
// import path and the type name.
func ParseFactory(s string) (path, name string, err error) {
	if msg := checkFactory(s); msg != "" {
		return "", "", errors.New(msg)
	}
	path, name, _ = splitFactory(s)
	return path, name, nil
}

// splitFactory splits IMPORT/PATH.TypeName at the last dot after the last
// slash; an import path's last element may not hold a dot here.
func splitFactory(s string) (path, name string, ok bool) {
	slash := strings.LastIndex(s, "/")
	dot := strings.LastIndex(s, ".")
	if dot <= slash || dot == len(s)-1 {
		return "", "", false
	}
	return s[:dot], s[dot+1:], true
}

// Entry is one item of the manifest's connectors: list, which names a
// plugin (for the KV contract, a connector) to link. The key keeps its
// name, which every manifest spells; messages, written for manifest
// authors, call an entry a connector too. Its tagged fields are the keys
// of an entry, as fileV1's are the manifest's (see fileV1 for the tags).
type Entry struct {
	// Pos is the position of the entry's first key, End that of its last
	// value (of the last item, for a list).
	Pos, End token.Position
	// Name is the registry key the connector is created by.
	Name Value[string] `yaml:"name" required:"true" name:"true" example:"redis" doc:"Registry key the connector is created by; unique across all names and aliases."`
	// Import is the Go import path of the package holding the constructor.
	Import Value[string] `yaml:"import" maxLength:"1024" required:"true" example:"github.com/acme/kvredis" doc:"Go import path of the package that holds the constructor."`
	// Constructor is the constructor's name; V is "" when omitted, and gen
	// then looks for a //kvgen:constructor marker in the package.
	Constructor Value[string] `yaml:"constructor" maxLength:"256" example:"New" doc:"Exported constructor function, which fits the manifest's factory (default kv.Factory). Default: the function the package marks with //kvgen:constructor."`
	// Roles are the names of the roles the connector serves, which gen
	// checks against those its contract declares; empty means every one.
	Roles []Value[string] `yaml:"roles" minItems:"1" unique:"true" pattern:"^[A-Za-z][A-Za-z0-9_-]*$" maxLength:"128" example:"[scheduler, worker]" doc:"Roles the connector serves, by the names its contract declares with a //kvgen:roles line (the KV connector contract: scheduler and worker). Default: every role the contract declares."`
	// Aliases are further registry keys for the connector.
	Aliases []Value[string] `yaml:"aliases" unique:"true" name:"true" example:"[RedisConnector]" doc:"Further registry keys for the connector, such as the names vLLM knows it by."`
	// Description is one line that says what the connector is for: the
	// listings show it in place of the constructor's doc summary, and the
	// registry and a binary's description keep it.
	Description Text `yaml:"description" maxLength:"200" pattern:"^[^\\x00-\\x1f\\x7f-\\x9f\\u2028\\u2029\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069]*$" example:"Redis, for KV that hosts share" doc:"One line that says what the connector is for: at most 200 bytes, without line breaks, control characters or bidirectional-text controls. kvgen list and kvgen doc show it in place of the constructor's doc summary; the generated registry keeps it (registry.Plugin's Description), and kvgen inspect reads it from a binary."`
	// Version is the least version of the connector's module to require,
	// as a require line names one: generate raises go.mod to it, build a
	// temporary copy; a go.mod that requires a higher one satisfies it.
	Version Value[string] `yaml:"version" maxLength:"256" example:"v1.4.0" doc:"Least version of the connector's module to require, as a go.mod require line names one: kvgen generate raises go.mod to it (kvgen build a temporary copy); a go.mod that requires a higher version, as a dependency bot leaves it, satisfies it."`
	// Replace is the module's local directory, relative to the manifest,
	// for a replace line in go.mod (build: in a temporary copy).
	Replace Value[string] `yaml:"replace" maxLength:"4096" example:"../kvredis" doc:"Local directory of the connector's module, relative to the manifest: kvgen generate adds a replace line for it to go.mod (kvgen build to a temporary copy)."`
	// Invalid is set when Parse reported a problem in the entry; gen
	// leaves such an entry out and still checks the others.
	Invalid bool
	// OnlyNames is set with Invalid when every problem Parse reported in
	// the entry is in its name or aliases (a name that is not valid, or
	// that another entry took): gen still checks the entry's package and
	// constructor, so that one run reports their problems too.
	OnlyNames bool
	// Pin is where a manifest that extends the one the entry is in pins
	// it (the name of its pin: entry), and invalid where none does.
	Pin token.Position
	// Dir is the directory Replace is relative to, relative to the
	// manifest given to LoadIn and with forward slashes: "" for that
	// manifest's own entries and pins, the extended manifest's directory
	// for entries that come from it.
	Dir string
}

// HasName reports whether the entry is named name, or has it as an alias.
func (c Entry) HasName(name string) bool {
	if c.Name.V == name {
		return true
	}
	for _, a := range c.Aliases {
		if a.V == name {
			return true
		}
	}
	return false
}

// RoleNames returns the names of the roles the connector serves, as
// listed; nil, when no roles were listed, means every role.
func (c Entry) RoleNames() []string {
	var names []string
	for _, r := range c.Roles {
		names = append(names, r.V)
	}
	return names
}

// Label is how errors name the entry at index (counted from 0 in
// Manifest.Entries): `connector "redis"`, or `connector 3` for the third
// entry when it has no valid name.
func (c Entry) Label(index int) string {
	if c.Name.Set && validName(c.Name.V) {
		return fmt.Sprintf("connector %q", c.Name.V)
	}
	return fmt.Sprintf("connector %d", index+1)
}

// MaxSize is the size of the largest manifest kvgen reads, in bytes. A
// manifest of a thousand connectors is about 200 KB; parsing costs memory
// in proportion to the size, so a runaway file is refused before it is.
const MaxSize = 1 << 20

// Parse parses and validates a manifest. On failure the error is a
// diag.List holding every problem found, sorted by position; messages name
// the entry they concern, say what is wrong and what to do.
//
// When every problem lies within connector entries, Parse returns the
// manifest along with the error, those entries marked Invalid, so that the
// other entries can still be checked in the same run. Otherwise the
// manifest is nil.
func Parse(filename string, data []byte) (*Manifest, error) {
	if len(data) > MaxSize {
		return nil, tooLarge(filename, int64(len(data)))
	}
	p := newParser(filename, data)
	m := p.parse()
	err := p.errs.Err()
	if err != nil && (m == nil || len(p.errs) > p.entryErrs) {
		return nil, err
	}
	return m, err
}

// Load reads and parses the manifest at path, as Parse does; positions use
// path as given. It reads no more than MaxSize bytes and only from a regular file.
func Load(path string) (*Manifest, error) { return LoadIn("", path) }

func tooLarge(path string, size int64) error {
	return diag.Errorf(token.Position{Filename: path}, "the manifest is %d bytes; kvgen reads manifests of up to %d bytes (1 MiB): is this the right file?", size, MaxSize)
}
