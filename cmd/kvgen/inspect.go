package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/ociimage"
	"github.com/kvgen/kvgen/internal/suggest"
)

func runInspect(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "inspect", "[-json] [-sbom] [-insecure] BINARY|DIR|IMAGE...")
	sbom := false
	var remote remoteFlags
	e.jsonFlag(fs, "{binaries, problems}, or with -sbom {sboms, problems}")
	fs.BoolVar(&sbom, "sbom", false, "print the CycloneDX SBOM of each binary, or the one attached to each platform's image, one JSON document after another")
	remote.register(fs)
	files, code := parseMixed(e, fs, args)
	if code >= 0 {
		return code
	}
	rm, err := remote.remote()
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if len(files) == 0 {
		return usageErrorf(e, fs, "inspect: name a binary, a directory of binaries, or an image")
	}
	// Each binary, or SBOM, is printed as soon as it is read, so that
	// memory holds one binary's findings at a time, however many files
	// are named.
	out := &binaryWriter{e: e, list: "binaries"}
	if sbom {
		out.list = "sboms"
	}
	e.json.set(out.list, []any{})
	failed := false
	report := func(errs []error) {
		for _, err := range errs {
			e.report(err)
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
					if err := out.sbom(f.SBOM); err != nil {
						report(errs(fmt.Errorf("image %s, %s: its SBOM: %w", suggest.Show(ref.String()), f.Platform, err)))
					}
				case !sbom && f.Binary != nil:
					out.binary(f.Binary)
				}
				report(errs(f.Err))
			}
			continue
		}
		report(inspectPath(ctx, name, func(b *inspect.Binary) {
			if !sbom {
				out.binary(b)
				return
			}
			data, err := ociimage.SBOM(b, ownVersion())
			if err == nil {
				err = out.sbom(data)
			}
			report(errs(inFile(b.Path, err)))
		}))
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
	// ./bin/srv and ../bin/srv are paths, whether or not they exist.
	if !ok || host == "." || host == ".." || (!strings.ContainsAny(host, ".:") && host != "localhost") {
		return ociimage.Ref{}, false
	}
	ref, err := ociimage.ParseRef(name)
	return ref, err == nil
}

// binaryWriter prints binaries, or their SBOMs, one at a time: as text,
// or as the items of the report's list.
type binaryWriter struct {
	e    *env
	list string // the report's list: binaries or sboms
	n    int
}

func (o *binaryWriter) binary(b *inspect.Binary) {
	switch {
	case o.e.asJSON:
		o.e.json.item(o.list, b) // a Binary's fields all encode
	default:
		if o.n > 0 {
			io.WriteString(o.e.stdout, "\n")
		}
		inspect.WriteText(o.e.stdout, []*inspect.Binary{b})
	}
	o.n++
}

// sbom prints an SBOM, a JSON document; one that is not JSON is an
// error. An image's SBOM comes from a registry: re-indented, its
// whitespace is spaces and newlines, and every other character that is
// not printable, which then lies in a string, is escaped, as in a report.
func (o *binaryWriter) sbom(data []byte) error {
	// Text and a -json report alike are indented.
	if err := indentable(data); err != nil {
		return err
	}
	if o.e.asJSON {
		return o.e.json.item(o.list, json.RawMessage(data))
	}
	var b bytes.Buffer
	if err := json.Indent(&b, bytes.TrimSpace(data), "", "  "); err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	b.WriteByte('\n')
	_, err := o.e.stdout.Write(printableJSON(b.Bytes()))
	return err
}

// inspectPath inspects a binary, or each Go binary in a directory (not
// below it), handing each to emit: there, files that are no Go binaries
// are passed over, and Go binaries without a kvgen registry are errors.
// A stop (ctx) ends it between files and within one.
func inspectPath(ctx context.Context, name string, emit func(*inspect.Binary)) []error {
	fi, err := os.Stat(name)
	if err != nil {
		return []error{inFile(name, err)}
	}
	if !fi.IsDir() {
		b, err := inspect.File(ctx, name)
		if b != nil {
			emit(b)
		}
		return errs(inFile(name, err))
	}
	ents, err := os.ReadDir(name)
	if err != nil {
		return []error{inFile(name, err)}
	}
	var list []error
	for _, ent := range ents {
		if ctx.Err() != nil {
			return append(list, ctx.Err())
		}
		if !ent.Type().IsRegular() {
			continue
		}
		path := filepath.Join(name, ent.Name())
		b, err := inspect.File(ctx, path)
		if b != nil {
			emit(b)
		}
		switch {
		case errors.Is(err, context.Canceled):
			list = append(list, err)
		case errors.Is(err, inspect.ErrNoRegistry) || errors.Is(err, inspect.ErrSuspect) || errors.Is(err, inspect.ErrTooManyCandidates):
			list = append(list, inFile(path, err))
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

// Bounds on an SBOM inspect prints indented: re-indenting costs each
// token a line as deep as it is nested, so a small SBOM nested deep would
// print as gigabytes.
const (
	maxSBOMDepth    = 64
	maxIndentedSBOM = 64 << 20
)

// indentable checks that data is JSON that indents within the bounds,
// from its tokens alone: each is given a line of its own, at most, as
// deep as it is nested.
func indentable(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	depth, size := 0, int64(len(data))
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("not JSON: %w", err)
		}
		switch tok {
		case json.Delim('['), json.Delim('{'):
			if depth++; depth > maxSBOMDepth {
				return fmt.Errorf("nested more than %d deep, deeper than an SBOM inspect prints", maxSBOMDepth)
			}
		case json.Delim(']'), json.Delim('}'):
			depth--
		}
		if size += int64(2*depth + 1); size > maxIndentedSBOM {
			return fmt.Errorf("more than %d bytes once indented, more than an SBOM inspect prints", maxIndentedSBOM)
		}
	}
}
