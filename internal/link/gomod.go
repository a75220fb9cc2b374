package link

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"go/token"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/rogpeppe/go-internal/lockedfile"
	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/kvgen/kvgen/internal/atomicfile"
	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/readfile"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Main is the main module: the module whose go.mod is linked.
type Main struct {
	// GoMod is the path of its go.mod; Dir is the directory holding it.
	GoMod, Dir string
	// Path is the module path.
	Path string

	data []byte
	file *modfile.File
	sum  []byte     // go.sum; nil when there is none
	work *workspace // what go.work gives it, after useWorkspace
}

// ErrNoModule says that a directory is in no module.
var ErrNoModule = errors.New("no go.mod here or in any parent directory; create the module first: go mod init MODULE-PATH")

// FindMain finds and reads the main module of dir, as the go command sees
// it with the environment env.
func FindMain(ctx context.Context, dir string, env []string) (*Main, error) {
	out, err := goCmd(ctx, dir, env, "env", "GOMOD")
	if err != nil {
		return nil, err
	}
	gomod := strings.TrimSpace(out)
	if gomod == "" || gomod == os.DevNull {
		return nil, ErrNoModule
	}
	return ReadMain(gomod)
}

// ReadMain reads the main module whose go.mod is at gomod, as the go
// command reported it (a package's Module.GoMod, or go env GOMOD).
func ReadMain(gomod string) (*Main, error) {
	m := &Main{GoMod: gomod, Dir: filepath.Dir(gomod)}
	var err error
	if m.data, err = readfile.Read(gomod, readfile.Max); err != nil {
		return nil, err
	}
	if m.file, err = modfile.Parse(gomod, m.data, nil); err != nil {
		return nil, err
	}
	if m.file.Module == nil {
		return nil, fmt.Errorf("%s has no module line", gomod)
	}
	m.Path = m.file.Module.Mod.Path
	if m.sum, err = readfile.ReadIfExists(m.GoSum(), readfile.Max); err != nil {
		return nil, err
	}
	return m, nil
}

// packagePath returns the import path of the absolute directory dir in
// the main module, or "" when dir lies outside it, or in a module nested
// in it, whose path the main module's does not tell.
func (m *Main) packagePath(dir string) string {
	rel, err := filepath.Rel(m.Dir, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return ""
	}
	for d := dir; d != m.Dir && d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return ""
		}
	}
	return path.Join(m.Path, filepath.ToSlash(rel))
}

// GoSum is the path of the main module's go.sum.
func (m *Main) GoSum() string {
	return filepath.Join(m.Dir, "go.sum")
}

// Requires returns the modules go.mod requires, the main module first.
func (m *Main) Requires() []string { return requires(m.Path, m.file) }

// Lack is what go.mod lacks for one manifest entry.
type Lack struct {
	// Pos is the manifest key that asks for it: replace:, else version:.
	Pos token.Position
	// Label names the entry, as errors do.
	Label string
	// Import is the entry's import path.
	Import string
	// Module is the entry's module, or "" when only the go command can
	// tell which module holds Import.
	Module string
	// Version is the version to require.
	Version string
	// Have is the version go.mod requires now, or "".
	Have string
	// Replace is the replacement go.mod should have, as go.mod writes it
	// (relative to the main module), or "".
	Replace string
}

// String says what go.mod lacks, as go.mod would say it.
func (l Lack) String() string {
	mod := l.Module
	if mod == "" {
		mod = "the module of " + l.Import
	}
	s := mod + " " + l.Version
	if l.Replace != "" {
		s += " => " + l.Replace
	}
	if l.Have != "" && l.Have != l.Version {
		s += " (go.mod requires " + l.Have + ")"
	}
	return s
}

// Plan is how a manifest's entries meet the main module's go.mod.
type Plan struct {
	// Main is the main module the plan is for.
	Main *Main
	// Modules maps an entry's index to its module path, where known.
	Modules map[int]string
	// Lacks are the entries go.mod does not satisfy, in manifest order.
	Lacks []Lack
	// Bad holds the indexes of the entries whose version: or replace:
	// is wrong; newPlan's error says why, and the plan leaves them out.
	Bad map[int]bool
	// Warnings are what the run may go on despite, each at its manifest
	// key and saying "warning:": a version: that go.mod's replace line
	// overrides.
	Warnings diag.List

	named map[string]entryAt // the first entry naming each module, by path
}

// entryAt is where a manifest entry names its module.
type entryAt struct {
	pos   token.Position
	label string
}

// newPlan compares the main module's go.mod with what the manifest's
// entries name: an entry with replace: needs its module required and
// replaced by that directory; an entry with version: needs its module
// required at that version or a higher one. Pruning modules no entry names is left to
// go mod tidy. Errors in entries are a diag.List, returned with a plan for
// the other entries (see Plan.Bad), so that their problems can be found
// too.
//
// replace: directories are relative to manifestDir, the absolute directory
// of the manifest.
func newPlan(m *manifest.Manifest, main *Main, manifestDir string) (*Plan, error) {
	pl := &planner{
		Plan:        &Plan{Main: main, Modules: map[int]string{}, Bad: map[int]bool{}, named: map[string]entryAt{}},
		manifestDir: manifestDir,
		required:    map[string]string{},
		claims:      map[string]*claim{},
	}
	for _, r := range main.file.Require {
		pl.required[r.Mod.Path] = r.Mod.Version
	}
	for i, c := range m.Entries {
		if mod := load.ModuleOf(c.Import.V, main.Requires()); mod != "" && mod != main.Path && !c.Invalid {
			pos := c.Import.Pos
			if c.Version.Set {
				pos = c.Version.Pos
			}
			if _, ok := pl.named[mod]; !ok {
				pl.named[mod] = entryAt{pos, c.Label(i)}
			}
		}
		switch {
		case c.Invalid || !c.Replace.Set && !c.Version.Set:
		case c.Replace.Set:
			if err := pl.replaced(i, c); err != nil {
				return nil, err
			}
		default:
			pl.versioned(i, c)
		}
	}
	return pl.Plan, pl.errs.Err()
}

// planner makes a Plan, one entry at a time.
type planner struct {
	*Plan
	manifestDir string
	required    map[string]string // go.mod's requirements: module path -> version
	claims      map[string]*claim // what the entries so far said of each module
	errs        diag.List
}

// claim is what an entry says of its module: entries whose packages share
// a module must agree on its version and directory.
type claim struct {
	label, version, dir string
	abs                 string // dir, made absolute
	versionPos, dirPos  token.Position
}

// fail reports a problem with entry i, which the plan then leaves out.
func (pl *planner) fail(i int, pos token.Position, format string, args ...any) {
	pl.errs.Add(pos, format, args...)
	pl.Bad[i] = true
}

// agree records entry i's claim on mod, or reports how it contradicts an
// earlier one and leaves the entry out.
func (pl *planner) agree(i int, mod string, c claim) bool {
	prev := pl.claims[mod]
	switch {
	case prev == nil:
		pl.claims[mod] = &c
	case prev.version != "" && c.version != "" && prev.version != c.version:
		pl.fail(i, c.versionPos, "%s: version %s of module %s disagrees with %s, version %s at %s; name one version", c.label, c.version, mod, prev.label, prev.version, diag.At(prev.versionPos, "the other version"))
		return false
	case prev.abs != "" && c.abs != "" && prev.abs != c.abs:
		pl.fail(i, c.dirPos, "%s: module %s is in %s, but %s replaces it by %s at %s; name one directory", c.label, mod, c.dir, prev.label, prev.dir, diag.At(prev.dirPos, "the other directory"))
		return false
	default:
		if prev.version == "" {
			prev.version, prev.versionPos = c.version, c.versionPos
		}
		if prev.abs == "" {
			prev.dir, prev.abs, prev.dirPos = c.dir, c.abs, c.dirPos
		}
	}
	return true
}

// versioned plans entry i, which names a version: and no replace:, for
// its module to be required at that version.
func (pl *planner) versioned(i int, c manifest.Entry) {
	main := pl.Main
	mod := load.ModuleOf(c.Import.V, main.Requires())
	if mod == main.Path {
		pl.fail(i, c.Version.Pos, "%s: %s is in the main module, %s, which has no version of its own; drop version:", c.Label(i), c.Import.V, main.Path)
		return
	}
	if msg := majorMismatch(mod, c.Import.V, c.Version.V); msg != "" {
		pl.fail(i, c.Version.Pos, "%s: %s", c.Label(i), msg)
		return
	}
	if mod != "" {
		pl.Modules[i] = mod
		if !pl.agree(i, mod, claim{label: c.Label(i), version: c.Version.V, versionPos: c.Version.Pos}) {
			return
		}
	}
	have := pl.required[mod]
	if mod != "" && atLeast(have, c.Version.V) {
		if to := replacement(main, mod, have); to != "" {
			pl.Warnings.Add(c.Version.Pos, "warning: %s: go.mod replaces module %s by %s, so the binary builds from there, not from version %s; drop version: or the replace line", c.Label(i), mod, to, c.Version.V)
		}
		return
	}
	if to := replacement(main, mod, c.Version.V); mod != "" && to != "" {
		// Requiring the version would change nothing the binary builds,
		// and the go command would look for it where it may not be.
		pl.fail(i, c.Version.Pos, "%s: %s belongs to module %s, which go.mod replaces by %s, so version %s does not apply to it: the binary builds from the replacement; drop version: (or the replace line, to build that version)", c.Label(i), c.Import.V, mod, to, c.Version.V)
		return
	}
	pl.Lacks = append(pl.Lacks, Lack{Pos: c.Version.Pos, Label: c.Label(i), Import: c.Import.V, Module: mod, Version: c.Version.V, Have: have})
}

// majorMismatch says why version cannot be a version of the module of
// importPath, mod when known, or returns "": from v2 on, a module's path
// ends in its major version (example.com/kv/v2), and a /vN module's
// versions are vN.x.y. A +incompatible version, of a v2+ module without a
// go.mod, is left to the go command, which can tell.
func majorMismatch(mod, importPath, version string) string {
	if strings.HasSuffix(version, "+incompatible") || strings.HasPrefix(importPath, "gopkg.in/") {
		return ""
	}
	major := semver.Major(version) // "v9"
	if mod == "" {
		// Not required yet: the module is the import path, or its prefix
		// up to a major version element.
		mod = importPath
		elems := strings.Split(importPath, "/")
		for i := 1; i < len(elems); i++ {
			if load.IsMajorElem(elems[i]) {
				mod = strings.Join(elems[:i+1], "/")
				break
			}
		}
		if _, pathMajor, ok := module.SplitPathVersion(mod); ok && pathMajor == "" && major != "v0" && major != "v1" {
			return fmt.Sprintf("version %s is major version %s, but %s is in no %s module: from v2 on, a module's path ends in its major version, as in %s/%s; import the package from that module, or name a v0 or v1 version",
				version, major[1:], importPath, major, mod, major)
		}
	}
	prefix, pathMajor, ok := module.SplitPathVersion(mod)
	if !ok || module.CheckPathMajor(version, pathMajor) == nil {
		return ""
	}
	if pathMajor == "" {
		return fmt.Sprintf("version %s is major version %s, but module %s is not a %s module: from v2 on, a module's path ends in its major version, so its %s is %s/%s; import the package from that module, or name a v0 or v1 version",
			version, major[1:], mod, major, major, mod, major)
	}
	return fmt.Sprintf("version %s is major version %s, but module %s is a %s module, whose versions are %s.x.y; name one, or import the package from %s",
		version, major[1:], mod, pathMajor[1:], pathMajor[1:], prefix)
}

// replaced plans entry i, which names a replace: directory, for its module
// to be required and replaced by that directory. Its error stops the plan.
func (pl *planner) replaced(i int, c manifest.Entry) error {
	main := pl.Main
	dir := filepath.Join(pl.manifestDir, filepath.FromSlash(c.Dir), filepath.FromSlash(c.Replace.V))
	modPath, err := modulePath(dir)
	switch {
	case err != nil:
		pl.fail(i, c.Replace.Pos, "%s: replace %q: %v", c.Label(i), c.Replace.V, err)
		return nil
	case modPath == main.Path:
		pl.fail(i, c.Replace.Pos, "%s: replace %q: that is %s, the main module, in which the registry file is generated; drop replace:, or generate the file in another module", c.Label(i), c.Replace.V, modPath)
		return nil
	case !load.InModule(c.Import.V, modPath):
		pl.fail(i, c.Import.Pos, "%s: %s is not in module %s, which %s holds", c.Label(i), c.Import.V, modPath, c.Replace.V)
		return nil
	}
	if c.Version.Set {
		if msg := majorMismatch(modPath, c.Import.V, c.Version.V); msg != "" {
			pl.fail(i, c.Version.Pos, "%s: %s", c.Label(i), msg)
			return nil
		}
	}
	pl.Modules[i] = modPath
	cl := claim{label: c.Label(i), dir: c.Replace.V, abs: dir, dirPos: c.Replace.Pos}
	if c.Version.Set {
		cl.version, cl.versionPos = c.Version.V, c.Version.Pos
	}
	if !pl.agree(i, modPath, cl) {
		return nil
	}
	have := pl.required[modPath]
	version := have
	if c.Version.Set && !atLeast(have, c.Version.V) {
		version = c.Version.V
	}
	if version == "" {
		// Without a version, require the zero pseudo-version of the
		// module's major version: v2 modules need a v2 version.
		_, pathMajor, _ := module.SplitPathVersion(modPath)
		major := module.PathMajorPrefix(pathMajor)
		if major == "" {
			major = "v0"
		}
		version = module.ZeroPseudoVersion(major)
	}
	target, err := ReplaceTarget(main.Dir, dir)
	if err != nil {
		return err
	}
	if have == version && replacedBy(main, modPath, version, dir) {
		return nil
	}
	pos := c.Replace.Pos
	if have != version && c.Version.Set {
		pos = c.Version.Pos
	}
	pl.Lacks = append(pl.Lacks, Lack{Pos: pos, Label: c.Label(i), Import: c.Import.V, Module: modPath, Version: version, Have: have, Replace: target})
	return nil
}

// atLeast reports whether go.mod's requirement have satisfies a manifest's
// version: want. version: is the least version the entry needs, as a
// require line is, so a go.mod that requires a higher one (as a dependency
// bot leaves it) satisfies it; a lower one, or none, does not.
func atLeast(have, want string) bool {
	return have != "" && semver.Compare(have, want) >= 0
}

// LacksError is a go.mod that does not satisfy the manifest: one
// positioned error for each entry it lacks.
type LacksError struct {
	// List holds one error for each entry go.mod lacks, at its position.
	List diag.List
	// Vendored says that the main module builds from its vendor
	// directory, which then lacks the modules too: go mod vendor records
	// them once go.mod has them.
	Vendored bool
}

// Error lists what go.mod lacks, one entry a line.
func (e *LacksError) Error() string { return e.List.Error() }

// Unwrap returns the positioned errors.
func (e *LacksError) Unwrap() error { return e.List }

// Err returns the plan's lacks as a *LacksError, or nil when go.mod
// satisfies the manifest.
func (p *Plan) Err() error {
	if len(p.Lacks) == 0 {
		return nil
	}
	var errs diag.List
	for _, l := range p.Lacks {
		errs.Add(l.Pos, "%s: go.mod lacks %s", l.Label, l)
	}
	return &LacksError{List: errs.Sort()}
}

// ReplaceTarget is how go.mod in modRoot names dir: relative, so that no
// machine path lands in go.mod or in a binary's build info.
func ReplaceTarget(modRoot, dir string) (string, error) {
	rel, err := filepath.Rel(modRoot, dir)
	if err != nil {
		return "", err
	}
	rel = filepath.ToSlash(rel)
	if rel != ".." && !strings.HasPrefix(rel, "../") {
		rel = "./" + rel
	}
	return rel, nil
}

// replacement returns what go.mod replaces modPath at version by, as
// go.mod writes it (a directory, or another module's path and version),
// or "" when it does not.
func replacement(main *Main, modPath, version string) string {
	if r := replaceOf(main, modPath, version); r != nil {
		return strings.TrimSpace(r.New.Path + " " + r.New.Version)
	}
	return ""
}

// replaceOf returns go.mod's replace line for modPath at version, or nil.
func replaceOf(main *Main, modPath, version string) *modfile.Replace {
	var r *modfile.Replace
	for _, rr := range main.file.Replace {
		// A replacement of one version wins over one of every version.
		if rr.Old.Path == modPath && (rr.Old.Version == "" && r == nil || rr.Old.Version == version) {
			r = rr
		}
	}
	return r
}

// ReplaceDir returns the directory go.mod replaces modPath by, at the
// version it requires, made absolute; "" when it does not replace it by a
// directory.
func (m *Main) ReplaceDir(modPath string) string {
	var version string
	for _, r := range m.file.Require {
		if r.Mod.Path == modPath {
			version = r.Mod.Version
		}
	}
	r := replaceOf(m, modPath, version)
	if r == nil || r.New.Version != "" {
		return ""
	}
	if filepath.IsAbs(r.New.Path) {
		return filepath.Clean(r.New.Path)
	}
	return filepath.Join(m.Dir, filepath.FromSlash(r.New.Path))
}

// Replaces returns go.mod's replace directives, each a directory made
// absolute or another module's path and version, in go.mod's order.
func (m *Main) Replaces() []module.Version {
	var rs []module.Version
	for _, r := range m.file.Replace {
		to := r.New
		if to.Version == "" && !filepath.IsAbs(to.Path) {
			to.Path = filepath.Join(m.Dir, filepath.FromSlash(to.Path))
		}
		rs = append(rs, r.Old, to)
	}
	return rs
}

// replacedBy reports whether go.mod replaces modPath at version by dir.
func replacedBy(main *Main, modPath, version, dir string) bool {
	r := replaceOf(main, modPath, version)
	if r == nil || r.New.Version != "" {
		return false // not replaced, or by another module
	}
	target := r.New.Path
	if !filepath.IsAbs(target) {
		target = filepath.Join(main.Dir, filepath.FromSlash(target))
	}
	return filepath.Clean(target) == filepath.Clean(dir)
}

// modulePath reads the module path from the go.mod in dir.
func modulePath(dir string) (string, error) {
	data, err := readfile.Read(filepath.Join(dir, "go.mod"), readfile.Max)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return "", fmt.Errorf("no go.mod in %s; replace names the directory of the connector's module, relative to the manifest", suggest.QuotePath(dir))
		}
		return "", err
	}
	p := modfile.ModulePath(data)
	if p == "" {
		return "", errors.New("its go.mod has no module line")
	}
	return p, nil
}

// Update is the main module's go.mod and go.sum with what a plan lacked
// added.
type Update struct {
	// GoModPath and GoSumPath are the main module's go.mod and go.sum.
	GoModPath, GoSumPath string
	// GoMod and GoSum are their new contents; GoSum is nil when the
	// module needs no go.sum.
	GoMod, GoSum []byte
	// BuildMod is the go.mod that loads and builds outside workspace
	// mode, with GoSum: GoMod, and, in workspace mode, what go.work gives
	// the main module (see Main.useWorkspace).
	BuildMod []byte
	// ModFile is the scratch go.mod that holds GoMod, for the go
	// command's -modfile, with its go.sum beside it; it lasts as long as
	// the directory given to Link, and Load's results, whose scratch
	// directory is gone when they are returned, leave it empty.
	ModFile string
	// Changes say what changed, one line each.
	Changes []string

	base     *Main             // go.mod and go.sum as the plan read them
	requires []string          // the modules GoMod requires, the main module first
	versions map[string]string // the versions GoMod requires them at, by path
}

// Versions maps each module the linked go.mod requires to its version.
func (u *Update) Versions() map[string]string { return u.versions }

// Versions maps each module go.mod requires to its version.
func (m *Main) Versions() map[string]string { return versions(m.file) }

// versions maps each module f requires to its version.
func versions(f *modfile.File) map[string]string {
	v := make(map[string]string, len(f.Require))
	for _, r := range f.Require {
		v[r.Mod.Path] = r.Mod.Version
	}
	return v
}

// Requires returns the modules the linked go.mod requires, the main
// module first.
func (u *Update) Requires() []string { return u.requires }

// requires lists the modules f requires, main first.
func requires(main string, f *modfile.File) []string {
	paths := []string{main}
	for _, r := range f.Require {
		paths = append(paths, r.Mod.Path)
	}
	return paths
}

// ErrChanged is what Update.Write returns when go.mod or go.sum is no
// longer what the plan was made from.
var ErrChanged = errors.New("go.mod or go.sum changed while kvgen was linking the manifest's modules")

// Write writes go.sum, then go.mod, each atomically, while it holds the
// lock the go command takes on go.mod to edit it, and only when neither
// changed since the plan read them. When one did (another kvgen run or a
// go get wrote it meanwhile), Write writes nothing and returns ErrChanged:
// writing would lose that edit, and the caller starts again from go.mod as
// it now is. Both files must lie inside the main module, after symbolic
// links.
func (u *Update) Write(ctx context.Context) error {
	main := u.base
	f, err := lockGoMod(ctx, main.GoMod)
	if err != nil {
		return err
	}
	defer f.Close()
	mod, err := io.ReadAll(io.LimitReader(f, readfile.Max+1))
	if err != nil {
		return err
	}
	sum, err := readfile.ReadIfExists(main.GoSum(), readfile.Max)
	if err != nil {
		return err
	}
	if !bytes.Equal(mod, main.data) || (sum == nil) != (main.sum == nil) || !bytes.Equal(sum, main.sum) {
		return ErrChanged
	}
	// Both files are checked before either is written.
	files := []struct {
		path string
		data []byte
	}{{u.GoSumPath, u.GoSum}, {u.GoModPath, u.GoMod}}
	for i, f := range files {
		resolved, inside, err := atomicfile.Within(main.Dir, f.path)
		if err != nil {
			return err
		}
		if !inside {
			return fmt.Errorf("%s leads outside the module at %s, to %s, through a symbolic link; kvgen writes only inside the module, so make it a file there", suggest.QuotePath(f.path), suggest.QuotePath(main.Dir), suggest.QuotePath(resolved))
		}
		files[i].path = resolved
	}
	for _, f := range files {
		if f.data == nil {
			continue // no go.sum needed
		}
		if err := atomicfile.Write(f.path, f.data); err != nil {
			return err
		}
	}
	return nil
}

// lockGoMod opens go.mod write-locked, as the go command does to edit it,
// waiting for whoever holds the lock, or for ctx to end. A go.mod renamed
// over while Write waited is not the one to lock: it locks the new one.
func lockGoMod(ctx context.Context, path string) (*lockedfile.File, error) {
	for {
		f, err := atomicfile.OpenLocked(ctx, path)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			return nil, fmt.Errorf("locking go.mod to update it: %w", err)
		}
		held, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		if !held.Mode().IsRegular() {
			f.Close()
			return nil, &readfile.NotRegularError{Path: path, Mode: held.Mode()}
		}
		if now, err := os.Stat(path); err == nil && os.SameFile(held, now) {
			return f, nil
		}
		f.Close()
	}
}

// Link writes go.mod and go.sum into the scratch directory dir with the
// require and replace lines the plan lacked, then runs go get there
// (-modfile) for each lacking entry's package, which adds what those
// modules require and their checksums. Nothing outside dir is written.
// env is the go command's environment.
func (p *Plan) Link(ctx context.Context, dir string, env []string) (*Update, error) {
	main := p.Main
	f, err := modfile.Parse(main.GoMod, main.data, nil)
	if err != nil {
		return nil, err
	}
	var get []string
	for _, l := range p.Lacks {
		if l.Replace != "" {
			if err := f.AddReplace(l.Module, "", l.Replace, ""); err != nil {
				return nil, err
			}
			if err := f.AddRequire(l.Module, l.Version); err != nil {
				return nil, err
			}
		}
		get = append(get, l.Import+"@"+l.Version)
	}
	// What the workspace gives, were it the go command's, is added last:
	// GoMod leaves it out.
	goMod := f
	if main.work != nil {
		f.Cleanup()
		plain, err := f.Format()
		if err != nil {
			return nil, err
		}
		if goMod, err = modfile.Parse(main.GoMod, plain, nil); err != nil {
			return nil, err
		}
		if err := main.addWorkspace(f); err != nil {
			return nil, err
		}
	}
	f.Cleanup()
	data, err := f.Format()
	if err != nil {
		return nil, err
	}
	u := &Update{GoModPath: main.GoMod, GoSumPath: main.GoSum(), ModFile: filepath.Join(dir, "go.mod"), base: main}
	if err := os.WriteFile(u.ModFile, data, 0o644); err != nil {
		return nil, err
	}
	sumFile := filepath.Join(dir, "go.sum")
	if main.sum != nil {
		if err := os.WriteFile(sumFile, main.sum, 0o644); err != nil {
			return nil, err
		}
	}
	if len(get) > 0 {
		if _, err := goCmd(ctx, main.Dir, env, append([]string{"get", "-modfile=" + u.ModFile}, get...)...); err != nil {
			return nil, p.annotate(err)
		}
	}
	if u.BuildMod, err = directRequires(u.ModFile, p.Lacks); err != nil {
		return nil, err
	}
	u.GoMod = u.BuildMod
	if main.work != nil {
		if u.GoMod, err = main.withoutWorkspace(u.BuildMod, goMod); err != nil {
			return nil, err
		}
	}
	if u.GoSum, err = os.ReadFile(sumFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	after, err := modfile.Parse(main.GoMod, u.GoMod, nil)
	if err != nil {
		return nil, err
	}
	u.Changes = changes(main.file, after)
	u.requires = requires(main.Path, after)
	u.versions = versions(after)
	return u, nil
}

// directRequires reads the go.mod at file and, when the plan lacked
// anything, marks the lacks' modules as direct requirements and rewrites
// the file: go get marks a module indirect when no package imports it yet,
// but the registry file is about to.
func directRequires(file string, lacks []Lack) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	f, err := modfile.Parse(file, data, nil)
	if err != nil {
		return nil, err
	}
	var mods []string
	for _, r := range f.Require {
		mods = append(mods, r.Mod.Path)
	}
	direct := map[string]bool{}
	for _, l := range lacks {
		direct[load.ModuleOf(l.Import, mods)] = true
	}
	if len(lacks) == 0 {
		return data, nil
	}
	reqs := make([]*modfile.Require, len(f.Require))
	for i, r := range f.Require {
		reqs[i] = &modfile.Require{Mod: r.Mod, Indirect: r.Indirect && !direct[r.Mod.Path]}
	}
	// As go mod tidy does: direct requirements in one block, indirect
	// ones in another.
	f.SetRequireSeparateIndirect(reqs)
	f.Cleanup()
	if data, err = f.Format(); err != nil {
		return nil, err
	}
	return data, os.WriteFile(file, data, 0o644)
}

// withoutWorkspace returns linked, a go.mod that Link completed with what
// the workspace gives, without the requirements of the workspace's
// modules and the replacements that plain, the go.mod before them, does
// not have.
func (m *Main) withoutWorkspace(linked []byte, plain *modfile.File) ([]byte, error) {
	f, err := modfile.Parse("go.mod", linked, nil)
	if err != nil {
		return nil, err
	}
	had := map[string]bool{}
	for _, r := range plain.Require {
		had[r.Mod.Path] = true
	}
	replaced := map[string]bool{}
	for _, r := range plain.Replace {
		replaced[r.Old.Path+"@"+r.Old.Version] = true
	}
	for _, r := range slices.Clone(f.Replace) {
		if !replaced[r.Old.Path+"@"+r.Old.Version] {
			if err := f.DropReplace(r.Old.Path, r.Old.Version); err != nil {
				return nil, err
			}
		}
	}
	for _, r := range slices.Clone(f.Require) {
		if _, used := m.work.uses[r.Mod.Path]; used && !had[r.Mod.Path] {
			if err := f.DropRequire(r.Mod.Path); err != nil {
				return nil, err
			}
		}
	}
	f.Cleanup()
	return f.Format()
}

// annotate places a go get failure at the first lacking entry it names,
// else at the first entry of the module it names; a module version the go
// command may not download, for GOPROXY=off, is said to be not in the
// module cache.
func (p *Plan) annotate(err error) error {
	msg := err.Error()
	if nc := load.LookupDisabled(msg); nc != nil {
		for _, l := range p.Lacks {
			if l.Module != "" && l.Module == nc.Module || l.Module == "" && load.InModule(l.Import, nc.Module) {
				return diag.Errorf(l.Pos, "%s: %w", l.Label, nc)
			}
		}
		if at, ok := p.named[nc.Module]; ok {
			return diag.Errorf(at.pos, "%s: %w", at.label, nc)
		}
		return nc
	}
	for _, l := range p.Lacks {
		if strings.Contains(msg, l.Import) || l.Module != "" && strings.Contains(msg, l.Module) {
			if mod := cmp.Or(l.Module, l.Import); l.Version != "" && strings.Contains(msg, mod+"@"+l.Version+":") && noSuchVersion(msg, l.Version) {
				// The go command's words name the proxy's reply, not
				// what to do about it.
				return diag.Errorf(l.Pos, "%s: there is no version %s of %s; go list -m -versions %s lists those there are (%v)", l.Label, l.Version, mod, mod, err)
			}
			return diag.Errorf(l.Pos, "%s: %v", l.Label, err)
		}
	}
	return err
}

// noSuchVersion reports whether the go command's words say that no module
// proxy (a file:// one included) has version of the module, or that its
// repository has no such revision: not that a checksum database could not
// vouch for it (GOPRIVATE's business), nor that the version does not fit
// the module path (a /v2 to add).
func noSuchVersion(msg, version string) bool {
	if strings.Contains(msg, "verifying module") || strings.Contains(msg, "verifying go.mod") {
		return false
	}
	miss := regexp.MustCompile(`/@v/` + regexp.QuoteMeta(version) + `\.(info|mod|zip): (404 Not Found|410 Gone|.*no such file or directory)`)
	return miss.MatchString(msg) || strings.Contains(msg, "unknown revision "+version)
}

// changes lists what differs between two go.mod files, in the terms of go
// get's own report: added, upgraded, downgraded, removed, replaced.
func changes(before, after *modfile.File) []string {
	var out []string
	if before.Go != nil && after.Go != nil && before.Go.Version != after.Go.Version {
		out = append(out, fmt.Sprintf("go %s (was %s)", after.Go.Version, before.Go.Version))
	}
	replaces := func(f *modfile.File) map[string]string {
		m := map[string]string{}
		for _, r := range f.Replace {
			if r.Old.Version == "" {
				m[r.Old.Path] = strings.TrimSpace(r.New.Path + " " + r.New.Version)
			}
		}
		return m
	}
	oldRepl, newRepl := replaces(before), replaces(after)
	had := map[string]string{}
	for _, r := range before.Require {
		had[r.Mod.Path] = r.Mod.Version
	}
	has := map[string]bool{}
	for _, r := range after.Require {
		path, v := r.Mod.Path, r.Mod.Version
		has[path] = true
		repl := ""
		if t := newRepl[path]; t != "" && t != oldRepl[path] {
			repl = " => " + t
		}
		switch old, ok := had[path]; {
		case !ok:
			out = append(out, fmt.Sprintf("added %s %s%s", path, v, repl))
		case old != v:
			verb := "upgraded"
			if semver.Compare(v, old) < 0 {
				verb = "downgraded"
			}
			out = append(out, fmt.Sprintf("%s %s %s -> %s%s", verb, path, old, v, repl))
		case repl != "":
			out = append(out, fmt.Sprintf("replaced %s %s%s", path, v, repl))
		}
	}
	for _, r := range before.Require {
		if !has[r.Mod.Path] {
			out = append(out, fmt.Sprintf("removed %s %s", r.Mod.Path, r.Mod.Version))
		}
	}
	return out
}

// goCmd runs the go command in dir, outside workspace mode, and returns
// its standard output; on failure the error is the go command's words.
func goCmd(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	stdout, _, err := gocmd.Run(ctx, dir, gocmd.WithoutWorkspace(env), args...)
	return string(stdout), err
}
