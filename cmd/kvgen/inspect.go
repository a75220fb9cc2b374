package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
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
	// Each binary is printed as soon as it is read, so that memory holds
	// one binary's findings at a time, however many files are named.
	out := &binaryWriter{w: e.stdout, asJSON: asJSON}
	failed := false
	report := func(errs []error) {
		for _, err := range errs {
			e.errorf("%v", err)
			failed = true
		}
	}
	for _, name := range files {
		if ctx.Err() != nil {
			break
		}
		if ref, ok := imageRef(name); ok {
			images, err := ociimage.Inspect(ctx, ref, rm, sbom)
			report(errs(err))
			for _, f := range images {
				switch {
				case sbom && f.SBOM != nil:
					e.stdout.Write(f.SBOM)
				case !sbom && f.Binary != nil:
					out.write(f.Binary)
				}
				report(errs(f.Err))
			}
			continue
		}
		report(inspectPath(ctx, name, func(b *inspect.Binary) {
			if !sbom {
				out.write(b)
				return
			}
			data, err := ociimage.SBOM(b, ownVersion())
			report(errs(err))
			e.stdout.Write(data)
		}))
	}
	if !sbom {
		out.close()
	}
	if failed || ctx.Err() != nil {
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
