// Package inspect reads, from a binary's file, which connectors its kvgen
// registry links, without running it: the registry's description that
// kvgen generates into the binary, joined with the module versions and sums
// the go command records in every binary (debug/buildinfo). It reads
// binaries of any target the go command builds for.
package inspect

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"strconv"

	"github.com/kvgen/kvgen/internal/readfile"
)

// Description is what kvgen generates into a registry file, for a binary
// to carry: the manifest and its connectors, as the manifest listed them.
type Description struct {
	// Manifest is the manifest's file name; ManifestSHA256 the hex
	// SHA-256 of its bytes.
	Manifest       string `json:"manifest"`
	ManifestSHA256 string `json:"manifest_sha256"`
	// Package is the import path of the package the registry is in.
	Package string `json:"package,omitempty"`
	// Factory is the contract the manifest's factory: names, or "" for
	// the KV connectors'.
	Factory    string      `json:"factory,omitempty"`
	Connectors []Connector `json:"connectors"`
}

// Connector is one linked connector.
type Connector struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases,omitempty"`
	Roles       []string `json:"roles,omitempty"` // none for contracts other than the KV connectors''
	Import      string   `json:"import"`
	Constructor string   `json:"constructor"`
	// Module is the connector's module; Version, Sum and Replace come
	// from the binary's build information, as go version -m shows them.
	Module  string `json:"module,omitempty"`
	Version string `json:"version,omitempty"`
	Sum     string `json:"sum,omitempty"`
	Replace string `json:"replace,omitempty"`
}

// SumManifest is how a Description names a manifest's content.
func SumManifest(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// magic starts an encoded description in a binary's data; the length of
// the JSON that follows, in eight hexadecimal digits, comes next.
const magic = "\x00kvgen registry v1\x00"

// lengthDigits is how many hexadecimal digits give the JSON's length.
const lengthDigits = 8

// Encode returns d as it is embedded: magic, length, JSON.
func Encode(d Description) (string, error) {
	data, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	if len(data) >= 1<<(4*lengthDigits) {
		return "", fmt.Errorf("a registry description of %d bytes is too long to embed", len(data))
	}
	return fmt.Sprintf("%s%0*x%s", magic, lengthDigits, len(data), data), nil
}

// decodeAll finds every encoded description in data, skipping whatever
// starts like one and is not (such as the magic in kvgen's own code).
func decodeAll(data []byte) []Description {
	var found []Description
	for rest := data; ; {
		i := bytes.Index(rest, []byte(magic))
		if i < 0 {
			return found
		}
		rest = rest[i+len(magic):]
		if len(rest) < lengthDigits {
			return found
		}
		n, err := strconv.ParseUint(string(rest[:lengthDigits]), 16, 32)
		if err != nil || uint64(len(rest)-lengthDigits) < n {
			continue
		}
		var d Description
		if json.Unmarshal(rest[lengthDigits:lengthDigits+int(n)], &d) == nil && d.Manifest != "" {
			found = append(found, d)
			rest = rest[lengthDigits+int(n):]
		}
	}
}

// Binary is what one binary links.
type Binary struct {
	Path string `json:"path"`
	// GoVersion, GOOS and GOARCH are the binary's, from its build
	// information.
	GoVersion string `json:"go"`
	GOOS      string `json:"goos,omitempty"`
	GOARCH    string `json:"goarch,omitempty"`
	// Main is the main package's module, as module@version.
	Main string `json:"main"`
	// Registries are the kvgen registries linked, usually one.
	Registries []Description `json:"registries"`
}

// ErrNoRegistry says that a Go binary links no kvgen registry.
var ErrNoRegistry = errors.New("no kvgen registry")

// MaxSize bounds the binaries File reads.
const MaxSize = 2 << 30

// File reads what the binary at path links. A file that is not a Go
// binary is an error from debug/buildinfo; a Go binary without a kvgen
// registry is ErrNoRegistry, wrapped with its path.
func File(path string) (*Binary, error) {
	f, err := readfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > MaxSize {
		return nil, fmt.Errorf("%s is %d bytes, larger than the %d bytes inspect reads", path, fi.Size(), int64(MaxSize))
	}
	info, err := buildinfo.Read(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	data := make([]byte, fi.Size())
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, fi.Size()), data); err != nil {
		return nil, err
	}
	b := &Binary{Path: path, GoVersion: info.GoVersion, Main: info.Main.Path + "@" + info.Main.Version}
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS":
			b.GOOS = s.Value
		case "GOARCH":
			b.GOARCH = s.Value
		}
	}
	b.Registries = decodeAll(data)
	if len(b.Registries) == 0 {
		return nil, fmt.Errorf("%w in %s: kvgen inspect reads binaries that link a registry kvgen generated", ErrNoRegistry, path)
	}
	mods := map[string]*debug.Module{info.Main.Path: &info.Main}
	for _, m := range info.Deps {
		mods[m.Path] = m
	}
	for i := range b.Registries {
		for j := range b.Registries[i].Connectors {
			c := &b.Registries[i].Connectors[j]
			m := mods[c.Module]
			if m == nil {
				continue
			}
			c.Version, c.Sum = m.Version, m.Sum
			if r := m.Replace; r != nil {
				c.Replace = r.Path
				// A directory's "version" is (devel), which says nothing.
				if r.Version != "" && r.Version != "(devel)" {
					c.Replace += " " + r.Version
				}
				if r.Sum != "" {
					c.Sum = r.Sum
				}
			}
		}
	}
	return b, nil
}
