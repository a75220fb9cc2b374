package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/ociimage"
)

func runInspect(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "inspect", "[-json] [-sbom] [-insecure] BINARY|DIR|IMAGE...")
	asJSON, sbom := false, false
	var rm ociimage.Remote
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	fs.BoolVar(&sbom, "sbom", false, "print the CycloneDX SBOM of each binary, or the one attached to each platform's image, one JSON document after another")
	fs.BoolVar(&rm.Insecure, "insecure", false, "reach a registry on this machine's loopback over plain HTTP")
	files, code := parseMixed(fs, args)
	if code >= 0 {
		return code
	}
	if len(files) == 0 {
		e.errorf("inspect: name a binary, a directory of binaries, or an image")
		fs.Usage()
		return exitUsage
	}
	var bins []*inspect.Binary
	var sboms [][]byte
	failed := false
	for _, name := range files {
		var found []*inspect.Binary
		var errs []error
		if ref, ok := imageRef(name); ok {
			var images []ociimage.Found
			images, err := ociimage.Inspect(ctx, ref, rm, sbom)
			if err != nil {
				errs = append(errs, err)
			}
			for _, f := range images {
				if f.Binary != nil {
					found = append(found, f.Binary)
				}
				if f.Err != nil {
					errs = append(errs, f.Err)
				}
				if f.SBOM != nil {
					sboms = append(sboms, f.SBOM)
				}
			}
		} else {
			found, errs = inspectPath(name)
			if sbom {
				for _, b := range found {
					data, err := ociimage.SBOM(b, ownVersion())
					if err != nil {
						errs = append(errs, err)
					}
					sboms = append(sboms, data)
				}
			}
		}
		bins = append(bins, found...)
		for _, err := range errs {
			e.errorf("%v", err)
			failed = true
		}
	}
	switch {
	case sbom:
		for _, data := range sboms {
			e.stdout.Write(data)
		}
	case asJSON:
		if bins == nil {
			bins = []*inspect.Binary{}
		}
		writeJSON(e.stdout, bins, false)
	default:
		inspect.WriteText(e.stdout, bins)
	}
	if failed {
		return exitError
	}
	return exitOK
}

// imageRef says whether an argument of inspect names an image: oci:DIR,
// docker-archive:FILE, or, when no file has its name, a registry's
// reference (HOST/REPOSITORY..., the host with a dot or a port, or
// localhost).
func imageRef(name string) (ociimage.Ref, bool) {
	if strings.HasPrefix(name, "oci:") || strings.HasPrefix(name, "docker-archive:") {
		ref, err := ociimage.ParseRef(name)
		return ref, err == nil
	}
	if _, err := os.Lstat(name); err == nil {
		return ociimage.Ref{}, false
	}
	host, _, ok := strings.Cut(strings.TrimPrefix(name, "docker://"), "/")
	if !ok || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return ociimage.Ref{}, false
	}
	ref, err := ociimage.ParseRef(name)
	return ref, err == nil
}

// inspectPath inspects a binary, or each Go binary in a directory (not
// below it): there, files that are no Go binaries are passed over, and Go
// binaries without a kvgen registry are errors.
func inspectPath(name string) ([]*inspect.Binary, []error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, []error{err}
	}
	if !fi.IsDir() {
		b, err := inspect.File(name)
		if b == nil {
			return nil, []error{err}
		}
		return []*inspect.Binary{b}, errs(err)
	}
	ents, err := os.ReadDir(name)
	if err != nil {
		return nil, []error{err}
	}
	var bins []*inspect.Binary
	var list []error
	for _, ent := range ents {
		if !ent.Type().IsRegular() {
			continue
		}
		b, err := inspect.File(filepath.Join(name, ent.Name()))
		if b != nil {
			bins = append(bins, b)
		}
		if errors.Is(err, inspect.ErrNoRegistry) || errors.Is(err, inspect.ErrSuspect) {
			list = append(list, err)
		}
	}
	return bins, list
}

// errs is err as a list: none for nil.
func errs(err error) []error {
	if err == nil {
		return nil
	}
	return []error{err}
}
