package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"

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
		if bins == nil {
			bins = []*inspect.Binary{}
		}
		writeJSON(e.stdout, bins, false)
	} else {
		inspect.WriteText(e.stdout, bins)
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
