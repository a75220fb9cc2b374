package ociimage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/suggest"
)

// The SBOM is CycloneDX 1.6 JSON: its components carry a Go module's
// path, version and package URL natively, its properties carry go.sum's
// h1: checksums (CycloneDX hashes are hex digests of the artifact itself,
// which h1: is not) and the connectors' registry entries, and its
// dependencies say which module each connector comes from. It is a
// function of the binary alone, so the SBOM of an image and kvgen inspect
// -sbom of the binary taken out of it are the same bytes.

type bom struct {
	BOMFormat    string       `json:"bomFormat"`
	SpecVersion  string       `json:"specVersion"`
	Version      int          `json:"version"`
	Metadata     bomMetadata  `json:"metadata"`
	Components   []component  `json:"components"`
	Dependencies []dependency `json:"dependencies"`
}

type bomMetadata struct {
	Tools     bomTools   `json:"tools"`
	Component component  `json:"component"`
	Props     []property `json:"properties,omitempty"`
}

type bomTools struct {
	Components []component `json:"components"`
}

type component struct {
	Type    string     `json:"type"`
	Ref     string     `json:"bom-ref,omitempty"`
	Name    string     `json:"name"`
	Version string     `json:"version,omitempty"`
	PURL    string     `json:"purl,omitempty"`
	Props   []property `json:"properties,omitempty"`
}

type property struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type dependency struct {
	Ref       string   `json:"ref"`
	DependsOn []string `json:"dependsOn"`
}

// SBOM is the CycloneDX SBOM of a binary: its main module; every module
// its build information lists, with version, go.sum checksum and
// replacement; and every connector its registries link, with the module
// it comes from. tool is kvgen's version.
func SBOM(bin *inspect.Binary, tool string) ([]byte, error) {
	info := bin.Info
	if info == nil {
		info = &debug.BuildInfo{}
	}
	b := bom{BOMFormat: "CycloneDX", SpecVersion: "1.6", Version: 1}
	b.Metadata.Tools.Components = []component{{Type: "application", Name: "kvgen", Version: tool, PURL: purl("github.com/kvgen/kvgen", tool)}}
	main := moduleComponent(&info.Main, "application")
	main.Props = append(main.Props, property{"kvgen:go", info.GoVersion})
	if info.Path != "" {
		main.Props = append(main.Props, property{"kvgen:package", info.Path})
	}
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS", "GOARCH", "CGO_ENABLED", "-tags", "-ldflags", "vcs.revision", "vcs.time", "vcs.modified":
			main.Props = append(main.Props, property{"kvgen:build:" + s.Key, s.Value})
		}
	}
	b.Metadata.Component = main
	refs := map[string]string{info.Main.Path: main.Ref}
	var mainDeps []string
	for _, m := range info.Deps {
		c := moduleComponent(m, "library")
		b.Components = append(b.Components, c)
		refs[m.Path] = c.Ref
		mainDeps = append(mainDeps, c.Ref)
	}
	b.Dependencies = append(b.Dependencies, dependency{Ref: main.Ref, DependsOn: nonNil(mainDeps)})
	for _, r := range bin.Registries {
		b.Metadata.Props = append(b.Metadata.Props,
			property{"kvgen:registry:" + r.Package + ":manifest", r.Manifest},
			property{"kvgen:registry:" + r.Package + ":manifest_sha256", r.ManifestSHA256})
		for _, c := range r.Entries {
			ref := "kvgen:connector:" + r.Package + ":" + c.Name
			props := []property{{"kvgen:connector:registry", r.Package}, {"kvgen:connector:import", c.Import}, {"kvgen:connector:constructor", c.Constructor}, {"kvgen:connector:module", c.Module}}
			if len(c.Roles) > 0 {
				props = append(props, property{"kvgen:connector:roles", strings.Join(c.Roles, ",")})
			}
			if len(c.Aliases) > 0 {
				props = append(props, property{"kvgen:connector:aliases", strings.Join(c.Aliases, ",")})
			}
			if c.Sum != "" {
				props = append(props, property{"kvgen:connector:sum", c.Sum})
			}
			b.Components = append(b.Components, component{Type: "library", Ref: ref, Name: c.Name, Version: c.Version, Props: props})
			var deps []string
			if m, ok := refs[c.Module]; ok {
				deps = []string{m}
			}
			b.Dependencies = append(b.Dependencies, dependency{Ref: ref, DependsOn: nonNil(deps)})
		}
	}
	if b.Components == nil {
		b.Components = []component{}
	}
	data, err := json.MarshalIndent(b, "", "  ")
	return append(data, '\n'), err
}

// describes checks that data, the SBOM attached to an image, is the one
// kvgen makes of bin, the image's binary: SBOM(bin, v), for the kvgen
// version v it names, must be the same bytes. Nothing else binds the SBOM
// beside a docker archive to the archive, and a referrer names its
// subject as anyone who can push to the repository names it: a stale,
// forged or other tool's SBOM is refused, not printed as the binary's.
func describes(data []byte, bin *inspect.Binary) error {
	v, err := toolVersion(data)
	if err != nil {
		return err
	}
	want, err := SBOM(bin, v)
	if err != nil {
		return err
	}
	if !bytes.Equal(data, want) {
		return fmt.Errorf("its SBOM does not describe its binary: from line %d it differs from the SBOM this kvgen makes of that binary for kvgen %s (stale, forged, or made by a kvgen that writes SBOMs otherwise); build the image again", diag.FirstDifferentLine(data, want), suggest.Quote(v))
	}
	return nil
}

// maxTools bounds the tools an SBOM's metadata may list, and maxKeys the
// keys of each object read on the way to them: kvgen writes one tool, and
// objects of six keys at most.
const (
	maxTools = 64
	maxKeys  = 64
)

// toolVersion returns the version of kvgen that data, an SBOM, names
// among its metadata's tools. It decodes one value at a time, and the
// tools one by one, so that what an SBOM within maxSBOM costs grows with
// its bytes, not with how many tools or keys they make.
func toolVersion(data []byte) (string, error) {
	notJSON := func(err error) error { return fmt.Errorf("its SBOM is not CycloneDX JSON: %w", err) }
	dec := json.NewDecoder(bytes.NewReader(data))
	found := false
	v := ""
	tools := 0
	err := objectKeys(dec, func(key string) (bool, error) {
		if key != "metadata" {
			return false, nil
		}
		return true, objectKeys(dec, func(key string) (bool, error) {
			if key != "tools" {
				return false, nil
			}
			return true, objectKeys(dec, func(key string) (bool, error) {
				if key != "components" {
					return false, nil
				}
				if err := delim(dec, '['); err != nil {
					return true, err
				}
				for ; dec.More(); tools++ {
					if tools == maxTools {
						return true, fmt.Errorf("its SBOM lists more than %d tools", maxTools)
					}
					var c struct{ Name, Version string }
					if err := dec.Decode(&c); err != nil {
						return true, err
					}
					if c.Name == "kvgen" && !found {
						found, v = true, c.Version
					}
				}
				return true, delim(dec, ']')
			})
		})
	})
	switch {
	case err != nil:
		return "", notJSON(err)
	case !found:
		return "", errors.New("its SBOM names no kvgen among its tools: inspect -sbom prints only the SBOM kvgen made of the image's binary")
	case len(v) > maxVersion:
		return "", fmt.Errorf("its SBOM names a kvgen version of %d bytes, which no kvgen has", len(v))
	}
	return v, nil
}

// maxVersion bounds a kvgen version an SBOM names, which an error quotes.
const maxVersion = 256

// objectKeys reads a JSON object from dec, calling each for its keys in
// turn; each reads the key's value itself and says so, or leaves it to be
// skipped.
func objectKeys(dec *json.Decoder, each func(key string) (bool, error)) error {
	if err := delim(dec, '{'); err != nil {
		return err
	}
	for n := 0; dec.More(); n++ {
		if n == maxKeys {
			return fmt.Errorf("an object of more than %d keys", maxKeys)
		}
		t, err := dec.Token()
		if err != nil {
			return err
		}
		key, _ := t.(string)
		read, err := each(key)
		if err != nil {
			return err
		}
		if !read {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return err
			}
		}
	}
	return delim(dec, '}')
}

// delim reads the delimiter want from dec. What it found instead is named
// by its kind alone: its value is the SBOM's, of any length and any
// characters.
func delim(dec *json.Decoder, want json.Delim) error {
	t, err := dec.Token()
	if err != nil {
		return err
	}
	if d, ok := t.(json.Delim); !ok || d != want {
		found := "a delimiter"
		switch t.(type) {
		case string:
			found = "a string"
		case float64, json.Number:
			found = "a number"
		case bool:
			found = "a boolean"
		case nil:
			found = "null"
		}
		return fmt.Errorf("want %s, found %s", want, found)
	}
	return nil
}

// moduleComponent is a module as a component: its package URL is its
// bom-ref, and its go.sum checksum and replacement are properties.
func moduleComponent(m *debug.Module, typ string) component {
	c := component{Type: typ, Name: m.Path, Version: version(m.Version)}
	c.PURL = purl(m.Path, m.Version)
	c.Ref = c.PURL
	if m.Sum != "" {
		c.Props = append(c.Props, property{"kvgen:go.sum", m.Sum})
	}
	if r := m.Replace; r != nil {
		c.Props = append(c.Props, property{"kvgen:replace", strings.TrimSpace(r.Path + " " + version(r.Version))})
		if r.Sum != "" {
			c.Props = append(c.Props, property{"kvgen:replace:go.sum", r.Sum})
		}
	}
	return c
}

// version is a module's version, or "" for (devel).
func version(v string) string {
	if v == "(devel)" {
		return ""
	}
	return v
}

// purl is a Go module's package URL.
func purl(path, v string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	p := "pkg:golang/" + strings.Join(segs, "/")
	if v = version(v); v != "" {
		p += "@" + url.PathEscape(v)
	}
	return p
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return slices.Clip(s)
}
