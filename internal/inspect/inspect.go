// Package inspect reads, from a binary's file, which connectors its kvgen
// registry links, without running it: the registry's description that
// kvgen generates into the binary, joined with the module versions and sums
// the go command records in every binary (debug/buildinfo). It reads
// binaries of any target the go command builds for.
//
// A binary's file is input like any other: it is read as a stream, in
// memory bounded whatever its headers claim, and a description that is not
// in the data the binary loads, or that its build information contradicts,
// is reported as suspect, not as linked.
package inspect

import (
	"bytes"
	"context"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
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
	Factory string  `json:"factory,omitempty"`
	Entries []Entry `json:"connectors"` // the JSON keeps the key binaries carry
}

// Entry is one manifest entry as the binary links it.
type Entry struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases,omitempty"`
	Roles       []string `json:"roles,omitempty"` // the roles it serves, for a contract that declares roles (//kvgen:roles)
	Import      string   `json:"import"`
	Constructor string   `json:"constructor"`
	// Description is the manifest's one line on what the connector is
	// for, where it gives one.
	Description string `json:"description,omitempty"`
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

// header is the length of what precedes the JSON: magic and length.
const header = len(magic) + lengthDigits

// MaxDescription bounds an encoded description's JSON. A manifest is at
// most 1 MiB and 10,000 connectors; its description, with each entry's
// module, stays well under this.
const MaxDescription = 8 << 20

// Encode returns d as it is embedded: magic, length, JSON.
func Encode(d Description) (string, error) {
	data, err := json.Marshal(d)
	if err != nil {
		return "", err
	}
	if len(data) > MaxDescription {
		return "", fmt.Errorf("a registry description of %d bytes is too long to embed (at most %d)", len(data), MaxDescription)
	}
	return fmt.Sprintf("%s%0*x%s", magic, lengthDigits, len(data), data), nil
}

// maxFound bounds how many descriptions one file yields; a binary links
// one registry, or a few.
const maxFound = 8

// maxCandidateBytes bounds how much of a file the scan reads as would-be
// descriptions, over and above reading the file once: a magic and a length
// cost a read of that length, and a file of nothing but magics claiming
// MaxDescription bytes each would otherwise cost 8 MiB a 28 bytes.
const maxCandidateBytes = 4 * MaxDescription

// maxConnectors bounds the connectors of the descriptions one file yields:
// a manifest lists at most 10,000.
const maxConnectors = 10_000

// jsonStart is how every encoded description's JSON starts, as Encode
// writes it: a candidate that does not is passed over before its length
// is read.
const jsonStart = `{"manifest":"`

// ErrTooManyCandidates says that a file holds more would-be descriptions
// than any binary kvgen built.
var ErrTooManyCandidates = errors.New("more would-be registry descriptions than a binary kvgen built holds")

// scanChunk is how much of a file the scan holds at once.
const scanChunk = 1 << 20

// found is a description and where in the file it starts.
type found struct {
	d              Description
	offset, length int64 // length: magic, length digits and JSON
}

// scan finds, in the size bytes r holds, every encoded description (at
// most maxFound; more is reported by the count of them it passed over),
// skipping whatever starts like one and is not, such as the magic in
// kvgen's own code. It reads the file a chunk at a time, and a
// description's JSON only once its length is known to be within
// MaxDescription and within the file, so its memory is bounded whatever
// the file holds.
func scan(ctx context.Context, r io.ReaderAt, size int64) (descs []found, passed int, err error) {
	buf := make([]byte, scanChunk+header)
	prefix := make([]byte, len(jsonStart))
	candidates, connectors := int64(0), 0
	for pos := int64(0); pos < size; {
		if err := ctx.Err(); err != nil {
			return descs, passed, err
		}
		n, err := r.ReadAt(buf[:min(int64(len(buf)), size-pos)], pos)
		if err != nil && !errors.Is(err, io.EOF) {
			return descs, passed, err
		}
		if n == 0 {
			return descs, passed, io.ErrUnexpectedEOF
		}
		w := buf[:n]
		// The next read starts where this chunk's magics end: after the
		// last description found, at a header that straddles the chunk's
		// end, or where a magic straddling the end would start.
		next := pos + int64(n-(len(magic)-1))
		for off := 0; ; {
			i := index(w[off:])
			if i < 0 {
				break
			}
			i += off
			begin := pos + int64(i)
			if len(w)-i < header {
				next = begin // read again from the magic: its header then fits
				if begin+int64(header) > size {
					return descs, passed, nil
				}
				break
			}
			off = i + len(magic)
			length, err := strconv.ParseUint(string(w[i+len(magic):i+header]), 16, 32)
			if err != nil || length < uint64(len(jsonStart)) || length > MaxDescription || int64(length) > size-begin-int64(header) {
				continue
			}
			if _, err := r.ReadAt(prefix, begin+int64(header)); err != nil || string(prefix) != jsonStart {
				continue
			}
			if candidates += int64(length); candidates > maxCandidateBytes {
				return descs, passed, fmt.Errorf("%w (%d MiB of them): a hostile file, or not a binary", ErrTooManyCandidates, candidates>>20)
			}
			data := make([]byte, length)
			if _, err := r.ReadAt(data, begin+int64(header)); err != nil && !errors.Is(err, io.EOF) {
				return descs, passed, err
			}
			d, ok := decode(data, maxConnectors-connectors)
			if !ok {
				continue
			}
			connectors += len(d.Entries)
			if len(descs) < maxFound {
				descs = append(descs, found{d, begin, int64(header) + int64(length)})
			} else {
				passed++
			}
			end := i + header + int(length)
			if end >= len(w) {
				next = begin + int64(header) + int64(length)
				break
			}
			off = end
		}
		if pos+int64(n) >= size && next >= pos+int64(n)-int64(len(magic)-1) {
			return descs, passed, nil
		}
		pos = next
	}
	return descs, passed, nil
}

// index returns where the first magic in w starts, or -1, as bytes.Index
// would; it looks for the magic's text first, as binaries are full of the
// zero byte the magic starts with, and searching for that is slow.
func index(w []byte) int {
	for from := 0; from+len(magic) <= len(w); {
		j := bytes.Index(w[from+1:], []byte(magic[1:]))
		if j < 0 {
			return -1
		}
		i := from + j
		if w[i] == 0 {
			return i
		}
		from = i + 1
	}
	return -1
}

// decode decodes a description's JSON; one without a manifest, with a
// connector that lacks a name, an import or a constructor, or with more
// than most connectors, is not one. Connectors are decoded one at a time,
// so that what the JSON decodes into stays in proportion to it: "{}" is
// three bytes, and an Entry two hundred.
func decode(data []byte, most int) (Description, bool) {
	if bytes.Count(data, []byte("{")) > most+1 {
		return Description{}, false // more connectors than it may have: no need to decode them
	}
	var raw struct {
		Description
		Entries []json.RawMessage `json:"connectors"`
	}
	if json.Unmarshal(data, &raw) != nil || raw.Manifest == "" || len(raw.Entries) > most {
		return Description{}, false
	}
	d := raw.Description
	d.Entries = make([]Entry, len(raw.Entries))
	for i, c := range raw.Entries {
		if json.Unmarshal(c, &d.Entries[i]) != nil {
			return Description{}, false
		}
		if c := d.Entries[i]; c.Name == "" || c.Import == "" || c.Constructor == "" {
			return Description{}, false
		}
	}
	return d, true
}

// Binary is what one binary links.
type Binary struct {
	Path string `json:"path"`
	// Image, for a binary read from an image, is the image as it was
	// named; ImageDigest the digest of its platform's image (its
	// manifest), and Platform that platform, os/arch[/variant]. Path is
	// then the binary's path in the image.
	Image       string `json:"image,omitempty"`
	ImageDigest string `json:"image_digest,omitempty"`
	Platform    string `json:"platform,omitempty"`
	// GoVersion, GOOS and GOARCH are the binary's, from its build
	// information.
	GoVersion string `json:"go"`
	GOOS      string `json:"goos,omitempty"`
	GOARCH    string `json:"goarch,omitempty"`
	// Main is the main package's module, as module@version.
	Main string `json:"main"`
	// Registries are the kvgen registries linked, usually one.
	Registries []Description `json:"registries"`
	// Suspect are descriptions found in the file that the binary does not
	// link as far as inspect can tell: outside the data it loads, or at
	// odds with its build information. Someone may have put them there.
	Suspect []Suspect `json:"suspect,omitempty"`
	// Passed counts the descriptions past the first maxFound (8), which inspect
	// does not report.
	Passed int `json:"passed,omitempty"`
	// Info is the binary's build information, every module it links.
	Info *debug.BuildInfo `json:"-"`
}

// Suspect is a description that a binary's file holds and that inspect
// does not believe the binary links.
type Suspect struct {
	Description
	// Offset is where in the file the description starts.
	Offset int64 `json:"offset"`
	// Reason says why it is suspect.
	Reason string `json:"reason"`
}

// ErrNoRegistry says that a Go binary links no kvgen registry.
var ErrNoRegistry = errors.New("no kvgen registry")

// ErrSuspect says that a binary's file holds a registry description that
// inspect does not believe it links.
var ErrSuspect = errors.New("suspect registry description")

// MaxSize bounds the binaries File reads: a scan reads the whole file.
const MaxSize = 2 << 30

// File reads what the binary at path links. A file that is not a Go
// binary is an error from debug/buildinfo; a Go binary without a kvgen
// registry is ErrNoRegistry, wrapped with its path. A binary whose file
// holds suspect descriptions is returned, with an error wrapping
// ErrSuspect that says why.
func File(ctx context.Context, path string) (*Binary, error) {
	f, err := readfile.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return Reader(ctx, path, f, fi.Size())
}

// Reader reads what a binary links from r, which holds size bytes, as File
// reads a file; name is the binary's Path, which messages show, such as an
// image's platform and the binary's path in it.
func Reader(ctx context.Context, name string, r io.ReaderAt, size int64) (*Binary, error) {
	shown := suggest.Show(name)
	if size > MaxSize {
		return nil, fmt.Errorf("%s is %d bytes, larger than the %d bytes inspect reads", shown, size, int64(MaxSize))
	}
	info, loaded, err := readHeaders(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	descs, passed, err := scan(ctx, r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", shown, err)
	}
	b := &Binary{Path: name, GoVersion: info.GoVersion, Main: info.Main.Path + "@" + info.Main.Version, Passed: passed, Info: info}
	for _, s := range info.Settings {
		switch s.Key {
		case "GOOS":
			b.GOOS = s.Value
		case "GOARCH":
			b.GOARCH = s.Value
		}
	}
	mods := map[string]*debug.Module{info.Main.Path: &info.Main}
	for _, m := range info.Deps {
		mods[m.Path] = m
	}
	for _, fd := range descs {
		reason := loaded.why(fd.offset, fd.length)
		if reason == "" {
			reason = contradicts(fd.d, mods)
		}
		if reason != "" {
			b.Suspect = append(b.Suspect, Suspect{Description: fd.d, Offset: fd.offset, Reason: reason})
			continue
		}
		b.Registries = append(b.Registries, fd.d)
	}
	for i := range b.Registries {
		for j := range b.Registries[i].Entries {
			join(&b.Registries[i].Entries[j], mods)
		}
	}
	if len(b.Suspect) > 0 {
		if b.Registries == nil {
			b.Registries = []Description{} // JSON lists none, as for every binary
		}
		s := b.Suspect[0]
		return b, fmt.Errorf("%w in %s at offset %d: %s; it may have been put there after the build, so inspect does not list it as linked", ErrSuspect, shown, s.Offset, s.Reason)
	}
	if len(b.Registries) == 0 {
		return nil, fmt.Errorf("%w in %s: kvgen inspect reads binaries that link a registry kvgen generated", ErrNoRegistry, shown)
	}
	return b, nil
}

// readHeaders reads a binary's build information and where its loaded
// data lies, reading at most maxHeaders of the file for both.
func readHeaders(r io.ReaderAt) (*debug.BuildInfo, loaded, error) {
	headers := budget(r)
	info, err := buildinfo.Read(headers)
	var l loaded
	if err == nil {
		l, err = loadedData(headers)
	}
	if headers.spent {
		err = errHeaders
	}
	return info, l, err
}

// join fills in a connector's version, sum and replacement from its
// module in the build information.
func join(c *Entry, mods map[string]*debug.Module) {
	m := mods[c.Module]
	if m == nil {
		return
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

// contradicts says how d disagrees with the binary's modules, or "": the
// registry's package and every connector must be in a module the binary
// was built with, as they are when the binary links them.
func contradicts(d Description, mods map[string]*debug.Module) string {
	if d.Package != "" && !inModules(d.Package, mods) {
		return fmt.Sprintf("its package %s is in none of the modules the binary was built with", suggest.Quote(d.Package))
	}
	for _, c := range d.Entries {
		if _, ok := mods[c.Module]; !ok {
			return fmt.Sprintf("its connector %s is of module %s, which the binary was not built with", suggest.Quote(c.Name), suggest.Quote(c.Module))
		}
	}
	return ""
}

// inModules reports whether the package path pkg lies in one of mods.
func inModules(pkg string, mods map[string]*debug.Module) bool {
	for p := pkg; p != "" && p != "."; {
		if _, ok := mods[p]; ok {
			return true
		}
		i := strings.LastIndexByte(p, '/')
		if i < 0 {
			break
		}
		p = p[:i]
	}
	return false
}

// WriteText prints bins as kvgen inspect does: for each binary, a line
// that names it, its toolchain and target, and its main module, then for
// each registry a line naming its package and manifest and a table of its
// connectors. Suspect descriptions follow, each marked so. Every string
// from the file is shown as show shows it, so no line holds a
// control character, however the file was made.
func WriteText(w io.Writer, bins []*Binary) error {
	var b strings.Builder
	for i, bin := range bins {
		if i > 0 {
			b.WriteByte('\n')
		}
		target := ""
		if bin.GOOS != "" {
			target = " " + show(bin.GOOS) + "/" + show(bin.GOARCH)
		}
		name := show(bin.Path)
		if bin.Image != "" {
			name = show(bin.Image) + " " + show(bin.Platform) + " " + name
		}
		fmt.Fprintf(&b, "%s: %s%s, %s\n", name, show(bin.GoVersion), target, show(bin.Main))
		if bin.ImageDigest != "" {
			fmt.Fprintf(&b, "image %s\n", show(bin.ImageDigest))
		}
		for _, r := range bin.Registries {
			fmt.Fprintf(&b, "registry %s from %s (sha256 %s)\n", show(r.Package), show(r.Manifest), show(r.ManifestSHA256))
			writeTable(&b, r)
		}
		for _, s := range bin.Suspect {
			fmt.Fprintf(&b, "suspect, not listed as linked: registry %s from %s (sha256 %s) at offset %d: %s\n",
				show(s.Package), show(s.Manifest), show(s.ManifestSHA256), s.Offset, s.Reason)
			writeTable(&b, s.Description)
		}
		if bin.Passed > 0 {
			fmt.Fprintf(&b, "... and %d more registry descriptions, not shown\n", bin.Passed)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTable prints a registry's connectors as a table, with a column of
// descriptions where a connector has one.
func writeTable(w io.Writer, r Description) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	described := slices.ContainsFunc(r.Entries, func(c Entry) bool { return c.Description != "" })
	header := "NAME\tROLES\tCONSTRUCTOR\tMODULE\tSUM"
	if described {
		header += "\tDESCRIPTION"
	}
	fmt.Fprintln(tw, header)
	for _, c := range r.Entries {
		name := show(c.Name)
		if len(c.Aliases) > 0 {
			name += " (" + showAll(c.Aliases, ", ") + ")"
		}
		mod := show(c.Module)
		if c.Version != "" {
			mod += "@" + show(c.Version)
		}
		if c.Replace != "" {
			mod += " => " + show(c.Replace)
		}
		line := fmt.Sprintf("%s\t%s\t%s.%s\t%s\t%s", name, showAll(c.Roles, ","), show(c.Import), show(c.Constructor), mod, show(c.Sum))
		if described {
			line += "\t" + show(c.Description)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// show shows a string from a binary's file as suggest.Show does, and an
// empty one as nothing.
func show(s string) string {
	if s == "" {
		return ""
	}
	return suggest.Show(s)
}

// showAll shows each of a list's strings, joined by sep.
func showAll(list []string, sep string) string {
	shown := make([]string, len(list))
	for i, s := range list {
		shown[i] = show(s)
	}
	return strings.Join(shown, sep)
}
