package ociimage

import (
	"encoding/json"
	"net/url"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/inspect"
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
