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
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/kvgen/kvgen/gen/diag"
	"github.com/kvgen/kvgen/internal/suggest"
	"github.com/kvgen/kvgen/registry"
)

// Value is a manifest value with the position it was written at. Set is
// false when the key was absent: then V holds the default and Pos is the
// zero position.
type Value[T any] struct {
	V   T
	Pos token.Position
	Set bool
}

// Manifest is a parsed connectors.yaml.
type Manifest struct {
	// File is the file name as given to Parse; every position uses it.
	File    string
	Version Value[int]
	// Package is the package of the generated file. When absent, gen uses
	// the package of the output directory.
	Package Value[string]
	// Output is the generated file, relative to the manifest's directory;
	// it defaults to connectors_gen.go.
	Output     Value[string]
	Connectors []Connector
}

// Connector is one entry of the connectors list.
type Connector struct {
	// Pos is the position of the entry's first key.
	Pos token.Position
	// Name is the registry key the connector is created by.
	Name Value[string]
	// Import is the Go import path of the package holding the constructor.
	Import Value[string]
	// Constructor is the constructor's name; V is "" when omitted, and gen
	// then looks for a //kvgen:constructor marker in the package.
	Constructor Value[string]
	// Roles are the roles the connector serves; empty means both.
	Roles []Value[registry.Role]
	// Aliases are further registry keys for the connector.
	Aliases []Value[string]
	// Version is the version of the connector's module to require;
	// generate adds it to go.mod, build to a temporary copy.
	Version Value[string]
	// Replace is the module's local directory, relative to the manifest,
	// for a replace line in go.mod (build: in a temporary copy).
	Replace Value[string]
	// Invalid is set when Parse reported a problem in the entry; gen
	// leaves such an entry out and still checks the others.
	Invalid bool
}

// RoleSet returns the roles the connector serves; the zero set, when no
// roles were listed, means every role.
func (c Connector) RoleSet() registry.RoleSet {
	var s registry.RoleSet
	for _, r := range c.Roles {
		s |= registry.NewRoleSet(r.V)
	}
	return s
}

// Label is how errors name the entry at index (counted from 0 in
// Manifest.Connectors): `connector "redis"`, or `connector 3` for the third
// entry when it has no valid name.
func (c Connector) Label(index int) string {
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

// LoadIn is Load for a path relative to the directory dir, not to the
// current directory; positions and messages still name the file by path.
func LoadIn(dir, path string) (*Manifest, error) {
	file := path
	if dir != "" && !filepath.IsAbs(path) {
		file = filepath.Join(dir, path)
	}
	f, err := os.Open(file)
	if perr, ok := err.(*fs.PathError); ok {
		perr.Path = path
	}
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w; run kvgen in the directory that holds the manifest, or name it with -manifest", err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file; name the manifest file with -manifest", suggest.Quote(path))
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, tooLarge(path, max(fi.Size(), int64(len(data))))
	}
	return Parse(path, data)
}

func tooLarge(path string, size int64) error {
	return diag.Errorf(token.Position{Filename: path}, "the manifest is %d bytes; kvgen reads manifests of up to %d bytes (1 MiB): is this the right file?", size, MaxSize)
}
