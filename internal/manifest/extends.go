package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/problemcap"
	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
)

// maxExtends bounds how many manifests one can extend in a chain.
const maxExtends = 16

// LoadIn is Load for a path relative to the directory dir, not to the
// current directory; positions and messages still name the file by path.
//
// A manifest that extends another has that one's entries merged in, ahead
// of its own: less the ones it drops, with the versions and replacements
// it pins. Positions name the file each entry, drop or pin was written in.
func LoadIn(dir, path string) (*Manifest, error) {
	return load(dir, path, nil)
}

// load loads the manifest at path and, recursively, the ones it extends;
// chain holds the absolute paths of the manifests that extend it.
func load(dir, path string, chain []string) (*Manifest, error) {
	file := path
	if dir != "" && !filepath.IsAbs(path) {
		file = filepath.Join(dir, path)
	}
	data, err := readManifest(file, path)
	if err != nil {
		return nil, err
	}
	if len(chain) > 0 && !startsAsManifest(data) {
		// Not a manifest: what it holds is none of kvgen's to show.
		return nil, fmt.Errorf("%s does not start as a kvgen manifest, with version:; extends: names a manifest", suggest.Show(path))
	}
	m, err := Parse(path, data)
	if m == nil || !m.Extends.Set {
		return m, err
	}
	var errs diag.List
	errs.Append(m.Extends.Pos, err)
	basePath := filepath.Join(filepath.Dir(path), filepath.FromSlash(m.Extends.V))
	abs, absErr := filepath.Abs(file)
	baseAbs, baseErr := filepath.Abs(filepath.Join(filepath.Dir(file), filepath.FromSlash(m.Extends.V)))
	switch {
	case absErr != nil || baseErr != nil:
		return nil, errors.Join(absErr, baseErr)
	case baseAbs == abs || slices.Contains(chain, baseAbs):
		errs.Add(m.Extends.Pos, "extends %q: %s is already being extended, by this manifest or one that extends it: a cycle; remove one of the extends:", m.Extends.V, basePath)
		return nil, errs.Err()
	case len(chain) >= maxExtends:
		errs.Add(m.Extends.Pos, "extends %q: manifests extend one another more than %d deep", m.Extends.V, maxExtends)
		return nil, errs.Err()
	}
	if err := mayExtend(abs, baseAbs, m.Extends.V); err != nil {
		errs.Add(m.Extends.Pos, "extends %s: %v", suggest.Quote(m.Extends.V), err)
		return nil, errs.Err()
	}
	base, err := load(dir, basePath, append(chain, abs))
	if base == nil {
		var d *diag.Error
		var l diag.List
		if !errors.As(err, &l) && !errors.As(err, &d) {
			err = diag.Errorf(m.Extends.Pos, "extends %q: %v", m.Extends.V, err)
		}
		errs.Append(m.Extends.Pos, err)
		return nil, errs.Err()
	}
	errs.Append(m.Extends.Pos, err)
	rel, err := filepath.Rel(filepath.Dir(abs), filepath.Dir(baseAbs))
	if err != nil {
		return nil, err
	}
	merge(m, base, filepath.ToSlash(rel), &errs)
	m.SHA256 = sum(append(data, base.SHA256...))
	err = errs.Err()
	if err != nil && !onlyEntryErrors(m, errs) {
		return nil, err
	}
	return m, err
}

// mayExtend says why the manifest at abs may not extend the file at
// baseAbs, named so in its extends:, or returns nil. The rule: extends:
// names a .yaml or .yml file inside the tree of the extending manifest's
// workspace (see workspace), after symbolic links; load then reads it only
// if it starts as a manifest. So a manifest cannot have kvgen read, and
// show in its errors, any file the user can read.
func mayExtend(abs, baseAbs, written string) error {
	if ext := path.Ext(written); ext != ".yaml" && ext != ".yml" {
		return errors.New("extends: names a manifest, a .yaml or .yml file")
	}
	real, err := filepath.EvalSymlinks(baseAbs)
	if err != nil {
		return nil // reading it says what is wrong, such as that it is missing
	}
	dir, err := filepath.EvalSymlinks(filepath.Dir(abs))
	if err != nil {
		return err
	}
	root := workspace(dir)
	if rel, err := filepath.Rel(root, real); err != nil || !filepath.IsLocal(rel) {
		return fmt.Errorf("%s is outside %s, the tree of the repository or module this manifest is in; extends: reads manifests only there", suggest.Show(real), suggest.Show(root))
	}
	return nil
}

// workspace is the directory whose tree a manifest in dir may extend
// manifests from: the nearest directory at or above dir that holds a .git
// (a repository, a worktree), else the outermost one that holds a go.mod
// (so a module nested in another, such as an example's, reaches its
// parent's manifests), else dir.
func workspace(dir string) string {
	root := dir
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		if _, err := os.Lstat(filepath.Join(d, "go.mod")); err == nil {
			root = d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return root
		}
		d = parent
	}
}

// startsAsManifest reports whether data starts as a kvgen manifest does:
// its first line that is not blank, a comment, a document start or a
// directive gives version:.
func startsAsManifest(data []byte) bool {
	data = bytes.TrimPrefix(data, []byte("\ufeff"))
	for len(data) > 0 {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		data = rest
		t := bytes.TrimSpace(line)
		switch {
		case len(t) == 0, t[0] == '#', t[0] == '%', bytes.Equal(t, []byte("---")):
			continue
		}
		return versionKey.Match(line)
	}
	return false
}

// versionKey is a top-level version: key, quoted or not.
var versionKey = regexp.MustCompile(`^(version|"version"|'version')\s*:`)

// onlyEntryErrors reports whether every problem lies within an entry that
// is marked Invalid, so that the others can still be checked.
func onlyEntryErrors(m *Manifest, errs diag.List) bool {
	for _, e := range errs {
		if !slices.ContainsFunc(m.Entries, func(c Entry) bool { return c.Invalid && within(c, e.Pos) }) {
			return false
		}
	}
	return true
}

// within reports whether pos lies in the entry c: in its file, from its
// first key to its last value.
func within(c Entry, pos token.Position) bool {
	return pos.Filename == c.Pos.Filename && c.Pos.Offset <= pos.Offset && pos.Offset <= c.End.Offset
}

// maxEntries is the most entries a manifest may link, those of the
// manifests it extends included: connectors:' maxItems.
const maxEntries = 10000

// merge puts base's entries ahead of m's own: those m drops left out, those
// it pins with the version and replacement it gives. baseDir is base's
// directory relative to m's, which base's replace: paths are relative to.
func merge(m, base *Manifest, baseDir string, errs *diag.List) {
	if base.Version.V != m.Version.V {
		errs.Add(m.Extends.Pos, "extends %q: %s is manifest version %d, this one %d; give both the same version", m.Extends.V, base.File, base.Version.V, m.Version.V)
	}
	// A deployment builds the same program as its base: one contract.
	switch {
	case !m.Factory.Set:
		m.Factory = base.Factory
	case m.Factory.V != base.Factory.V:
		errs.Add(m.Factory.Pos, "factory %q: %s names the contract %s; a manifest has the contract of the manifest it extends, so remove factory: here", m.Factory.V, base.File, contractName(base))
	}
	dropped, pins := baseEdits(m, base, errs)
	var merged []Entry
	for i, c := range base.Entries {
		if dropped[i] {
			continue
		}
		c.Dir = path.Join(baseDir, c.Dir)
		if p, ok := pins[i]; ok {
			c.Pin = p.Name.Pos
			if p.Version.Set {
				c.Version = p.Version
			}
			if p.Replace.Set {
				c.Replace, c.Dir = p.Replace, ""
			}
		}
		merged = append(merged, c)
	}
	own := m.Entries
	if n := len(merged) + len(own); n > maxEntries {
		errs.Add(m.Extends.Pos, "extends %q: with this manifest's own, %d connectors, more than the %d a manifest may link; drop some", m.Extends.V, n, maxEntries)
		m.Entries = nil
		return
	}
	conflicts(merged, own, base.File, errs)
	m.Entries = append(merged, own...)
}

// baseLookup finds base's entries by name. Names are looked up in a map
// and near names suggested for the first problems only (no more are
// shown): a merge of thousands of entries and drops stays linear.
type baseLookup struct {
	base      *Manifest
	index     map[string]int
	suggested int
}

func newBaseLookup(base *Manifest) *baseLookup {
	index := make(map[string]int, len(base.Entries))
	for i, c := range base.Entries {
		if _, ok := index[c.Name.V]; !ok {
			index[c.Name.V] = i
		}
	}
	return &baseLookup{base: base, index: index}
}

// find returns the index of base's entry called name, or -1.
func (l *baseLookup) find(name string) int {
	if i, ok := l.index[name]; ok {
		return i
	}
	return -1
}

// near suggests base's names near name, for a problem's message.
func (l *baseLookup) near(name string) string {
	if l.suggested++; l.suggested > problemcap.Max {
		return ""
	}
	return baseNames(l.base, name)
}

// baseEdits returns, by the index of base's entry, the entries m drops and
// those it pins, reporting in errs the drops and pins that name no entry
// or contradict each other.
func baseEdits(m, base *Manifest, errs *diag.List) (dropped map[int]bool, pins map[int]pinV1) {
	names := newBaseLookup(base)
	dropped = map[int]bool{}
	for _, d := range m.drop {
		i := names.find(d.V)
		if i < 0 {
			errs.Add(d.Pos, "drop %q: %s lists no connector named %q%s", d.V, base.File, d.V, names.near(d.V))
			continue
		}
		dropped[i] = true
	}
	pins = map[int]pinV1{}
	for _, p := range m.pin {
		i := names.find(p.Name.V)
		switch {
		case i < 0:
			errs.Add(p.Name.Pos, "pin %q: %s lists no connector named %q%s", p.Name.V, base.File, p.Name.V, names.near(p.Name.V))
			continue
		case dropped[i]:
			errs.Add(p.Name.Pos, "pin %q: the connector is dropped too; keep one of the two", p.Name.V)
			continue
		case !p.Version.Set && !p.Replace.Set:
			errs.Add(p.Name.Pos, "pin %q: give the version: or the replace: to pin", p.Name.V)
			continue
		}
		if prev, dup := pins[i]; dup {
			errs.Add(p.Name.Pos, "pin %q: the connector is pinned twice (first at %s); keep one", p.Name.V, diag.At(prev.Name.Pos, "first pinned here"))
			continue
		}
		pins[i] = p
	}
	return dropped, pins
}

// AtPin places e, a problem found in checking m's entries, at the pin:
// that changes the entry it lies in, if a manifest that extends the entry's
// pins it (the problem may be in its package as the pinned version or
// directory holds it): that is the line the user wrote. The entry is named
// as a related position. A problem at the pinned version: or replace: is
// there already, and one outside pinned entries comes back as it is.
func (m *Manifest) AtPin(e *diag.Error) *diag.Error {
	for _, c := range m.Entries {
		if c.Pin.IsValid() && within(c, e.Pos) {
			entry := diag.At(e.Pos, "the pinned entry")
			moved := *e
			moved.Pos = c.Pin
			moved.Msg = fmt.Sprintf("%s (as pinned here; the entry is at %s)", e.Msg, entry)
			moved.Related = append(slices.Clip(e.Related), entry)
			return &moved
		}
	}
	return e
}

// contractName names m's contract in messages.
func contractName(m *Manifest) string {
	if m.Factory.Set {
		return fmt.Sprintf("%q", m.Factory.V)
	}
	return "of the KV connectors (no factory:)"
}

// conflicts reports each name or alias of an entry of m's own that an entry
// of the extended manifest still has, at the own entry, with both positions;
// that entry is then left out.
func conflicts(kept, own []Entry, baseFile string, errs *diag.List) {
	names := make(map[string]int, len(kept)) // each name or alias's first entry
	for j, b := range kept {
		for _, k := range append([]Value[string]{b.Name}, b.Aliases...) {
			if _, ok := names[k.V]; !ok {
				names[k.V] = j
			}
		}
	}
	for i := range own {
		c := &own[i]
		keys := []Value[string]{c.Name}
		keys = append(keys, c.Aliases...)
		for _, k := range keys {
			j, ok := names[k.V]
			if !ok || !k.Set {
				continue
			}
			b := kept[j]
			errs.Add(k.Pos, "%s: %q is already a name of %s of %s at %s; drop that one with drop: [%s], pin its version or replace with pin:, or rename this one",
				c.Label(i), k.V, b.Label(j), baseFile, diag.At(b.Name.Pos, "named here"), b.Name.V)
			c.Invalid = true
			break
		}
	}
}

// baseNames says which connectors of a manifest a name could have meant:
// the nearest, else all of them.
func baseNames(m *Manifest, name string) string {
	var names []string
	for _, c := range m.Entries {
		names = append(names, c.Name.V)
	}
	if near := suggest.Nearest(name, names, 1); len(near) > 0 {
		return fmt.Sprintf("; did you mean %q?", near[0])
	}
	if len(names) == 0 {
		return ""
	}
	return "; it lists " + strings.Join(names, ", ")
}

// FileError is a manifest that is not there to read: missing, or not a
// regular file. Where it is the manifest kvgen was given, the command says
// how to name another; where another manifest extends it, the error is at
// that extends: line.
type FileError struct {
	// Path is the manifest's path as given.
	Path string
	// Err says what is there instead; it wraps fs.ErrNotExist for a
	// missing file.
	Err error
}

func (e *FileError) Error() string { return e.Err.Error() }

// Unwrap returns what is there instead.
func (e *FileError) Unwrap() error { return e.Err }

// readManifest reads the manifest file, named path in messages: a regular
// file of at most MaxSize bytes.
func readManifest(file, path string) ([]byte, error) {
	f, err := readfile.Open(file)
	var nr *readfile.NotRegularError
	switch {
	case errors.As(err, &nr):
		nr.Path = path
		return nil, &FileError{Path: path, Err: nr}
	case errors.Is(err, fs.ErrNotExist):
		return nil, &FileError{Path: path, Err: fmt.Errorf("open %s: %w", suggest.Show(path), fs.ErrNotExist)}
	case err != nil:
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		return nil, tooLarge(path, max(fi.Size(), int64(len(data))))
	}
	return data, nil
}

// sum is the hex SHA-256 of data.
func sum(data []byte) string {
	s := sha256.Sum256(data)
	return hex.EncodeToString(s[:])
}
