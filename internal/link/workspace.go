package link

import (
	"fmt"
	"path/filepath"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"

	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/readfile"
)

// workspace is what go.work gives the main module: the other modules it
// uses, by their directories, and its replacements.
type workspace struct {
	uses    map[string]string  // module path -> absolute directory
	replace []*modfile.Replace // go.work's replace lines, New made absolute when a directory
}

// useWorkspace reads the go.work that puts the go command, run in the
// main module with env, in workspace mode, if any. Link, which runs the
// go command outside workspace mode on a scratch go.mod (-modfile is
// refused in it), then links the modules go.work uses, and its
// replacements, into the go.mod that loads and builds (Update.BuildMod),
// and leaves them out of the one the main module is to have
// (Update.GoMod): the workspace provides them there.
func (m *Main) useWorkspace(env []string) error {
	path := gocmd.WorkFile(m.Dir, env)
	if path == "" {
		return nil
	}
	data, err := readfile.Read(path, readfile.Max)
	if err != nil {
		return err
	}
	wf, err := modfile.ParseWork(path, data, nil)
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(dir, filepath.FromSlash(p))
	}
	w := &workspace{uses: map[string]string{}}
	for _, u := range wf.Use {
		d := abs(u.Path)
		if d == filepath.Clean(m.Dir) {
			continue
		}
		mod, err := modulePath(d)
		if err != nil {
			return fmt.Errorf("%s: use %s: %w", path, u.Path, err)
		}
		w.uses[mod] = d
	}
	for _, r := range wf.Replace {
		r := *r
		if r.New.Version == "" {
			r.New.Path = abs(r.New.Path)
		}
		w.replace = append(w.replace, &r)
	}
	m.work = w
	return nil
}

// addWorkspace adds to f, the main module's go.mod, what the workspace
// gives it: each module it uses, required at its major version's zero
// version and replaced by its directory, and go.work's replacements that
// go.mod does not make itself.
func (m *Main) addWorkspace(f *modfile.File) error {
	if m.work == nil {
		return nil
	}
	required := map[string]bool{}
	for _, r := range f.Require {
		required[r.Mod.Path] = true
	}
	replaced := map[string]bool{}
	for _, r := range f.Replace {
		replaced[r.Old.Path] = true
	}
	for mod, dir := range m.work.uses {
		target, err := ReplaceTarget(m.Dir, dir)
		if err != nil {
			return err
		}
		if !required[mod] {
			_, pathMajor, _ := module.SplitPathVersion(mod)
			major := module.PathMajorPrefix(pathMajor)
			if major == "" {
				major = "v0"
			}
			if err := f.AddRequire(mod, module.ZeroPseudoVersion(major)); err != nil {
				return err
			}
		}
		if err := f.AddReplace(mod, "", target, ""); err != nil {
			return err
		}
		replaced[mod] = true
	}
	for _, r := range m.work.replace {
		if replaced[r.Old.Path] {
			continue
		}
		to := r.New.Path
		if r.New.Version == "" {
			var err error
			if to, err = ReplaceTarget(m.Dir, to); err != nil {
				return err
			}
		}
		if err := f.AddReplace(r.Old.Path, r.Old.Version, to, r.New.Version); err != nil {
			return err
		}
	}
	return nil
}
