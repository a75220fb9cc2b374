package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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
	// Each binary is printed as soon as it is read, so that memory holds
	// one binary's findings at a time, however many files are named.
	out := &binaryWriter{w: e.stdout, asJSON: asJSON}
	failed := false
	for _, name := range files {
		for _, err := range inspectPath(ctx, name, out.write) {
			e.errorf("%v", err)
			failed = true
		}
		if ctx.Err() != nil {
			break
		}
	}
	out.close()
	if failed || ctx.Err() != nil {
		return exitError
	}
	return exitOK
}

// binaryWriter prints binaries one at a time: as text, or as the elements
// of one JSON list.
type binaryWriter struct {
	w      io.Writer
	asJSON bool
	n      int
}

func (o *binaryWriter) write(b *inspect.Binary) {
	switch {
	case o.asJSON:
		// As one list encoded whole would read: each element indented.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("  ", "  ")
		enc.SetEscapeHTML(false)
		enc.Encode(b)
		sep := "[\n  "
		if o.n > 0 {
			sep = ",\n  "
		}
		io.WriteString(o.w, sep)
		o.w.Write(printableJSON(bytes.TrimSuffix(buf.Bytes(), []byte("\n"))))
	default:
		if o.n > 0 {
			io.WriteString(o.w, "\n")
		}
		inspect.WriteText(o.w, []*inspect.Binary{b})
	}
	o.n++
}

// close ends the JSON list: empty when no binary was printed.
func (o *binaryWriter) close() {
	switch {
	case !o.asJSON:
	case o.n == 0:
		io.WriteString(o.w, "[]\n")
	default:
		io.WriteString(o.w, "\n]\n")
	}
}

// inspectPath inspects a binary, or each Go binary in a directory (not
// below it), handing each to emit: there, files that are no Go binaries
// are passed over, and Go binaries without a kvgen registry are errors.
// A stop (ctx) ends it between files and within one.
func inspectPath(ctx context.Context, name string, emit func(*inspect.Binary)) []error {
	fi, err := os.Stat(name)
	if err != nil {
		return []error{err}
	}
	if !fi.IsDir() {
		b, err := inspect.File(ctx, name)
		if b != nil {
			emit(b)
		}
		return errs(err)
	}
	ents, err := os.ReadDir(name)
	if err != nil {
		return []error{err}
	}
	var list []error
	for _, ent := range ents {
		if ctx.Err() != nil {
			return append(list, ctx.Err())
		}
		if !ent.Type().IsRegular() {
			continue
		}
		b, err := inspect.File(ctx, filepath.Join(name, ent.Name()))
		if b != nil {
			emit(b)
		}
		if errors.Is(err, inspect.ErrNoRegistry) || errors.Is(err, inspect.ErrSuspect) || errors.Is(err, inspect.ErrTooManyCandidates) || errors.Is(err, context.Canceled) {
			list = append(list, err)
		}
	}
	return list
}

// errs is err as a list: none for nil.
func errs(err error) []error {
	if err == nil {
		return nil
	}
	return []error{err}
}
