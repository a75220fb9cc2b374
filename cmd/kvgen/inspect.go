package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/kvgen/kvgen/internal/inspect"
)

func runInspect(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "inspect", "[-json] BINARY|DIR...")
	asJSON := false
	fs.BoolVar(&asJSON, "json", false, "print JSON")
	files, code := parseMixed(fs, args)
	if code >= 0 {
		return code
	}
	if len(files) == 0 {
		e.errorf("inspect: name a binary, or a directory of binaries")
		fs.Usage()
		return exitUsage
	}
	var bins []*inspect.Binary
	failed := false
	for _, name := range files {
		found, err := inspectPath(name)
		bins = append(bins, found...)
		for _, err := range err {
			e.errorf("%v", err)
			failed = true
		}
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		if bins == nil {
			bins = []*inspect.Binary{}
		}
		enc.Encode(bins)
	} else {
		printBinaries(e, bins)
	}
	if failed {
		return exitError
	}
	return exitOK
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
		if err != nil {
			return nil, []error{err}
		}
		return []*inspect.Binary{b}, nil
	}
	ents, err := os.ReadDir(name)
	if err != nil {
		return nil, []error{err}
	}
	var bins []*inspect.Binary
	var errs []error
	for _, ent := range ents {
		if !ent.Type().IsRegular() {
			continue
		}
		b, err := inspect.File(filepath.Join(name, ent.Name()))
		switch {
		case err == nil:
			bins = append(bins, b)
		case isNoRegistry(err):
			errs = append(errs, err)
		}
	}
	return bins, errs
}

func isNoRegistry(err error) bool {
	return errors.Is(err, inspect.ErrNoRegistry)
}

// printBinaries prints each binary's connectors as a table under a line
// that names the binary, its toolchain and target, and its manifest.
func printBinaries(e *env, bins []*inspect.Binary) {
	for i, b := range bins {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		target := ""
		if b.GOOS != "" {
			target = " " + b.GOOS + "/" + b.GOARCH
		}
		fmt.Fprintf(e.stdout, "%s: %s%s, %s\n", b.Path, b.GoVersion, target, b.Main)
		for _, r := range b.Registries {
			fmt.Fprintf(e.stdout, "registry %s from %s (sha256 %s)\n", r.Package, r.Manifest, r.ManifestSHA256)
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLES\tCONSTRUCTOR\tMODULE\tSUM")
			for _, c := range r.Connectors {
				name := c.Name
				if len(c.Aliases) > 0 {
					name += " (" + strings.Join(c.Aliases, ", ") + ")"
				}
				mod := c.Module
				if c.Version != "" {
					mod += "@" + c.Version
				}
				if c.Replace != "" {
					mod += " => " + c.Replace
				}
				fmt.Fprintf(tw, "%s\t%s\t%s.%s\t%s\t%s\n", name, strings.Join(c.Roles, ","), c.Import, c.Constructor, mod, c.Sum)
			}
			tw.Flush()
		}
	}
}
