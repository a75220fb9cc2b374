// Package atomicfile writes files so that a failed or killed write leaves
// the old file intact: every file kvgen writes goes through Write.
package atomicfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/rogpeppe/go-internal/lockedfile"

	"github.com/kvgen/kvgen/internal/suggest"
)

// Write writes data to path atomically: it writes a temporary file in
// the same directory and renames it over path, so a failed or killed run
// leaves the old file intact. An existing file keeps its permissions, and
// a symbolic link keeps pointing at the file, which is replaced. The
// temporary files that an earlier Write of path, killed before its
// rename, left behind are removed first.
func Write(path string, data []byte) error {
	return WriteFrom(path, bytes.NewReader(data))
}

// WriteFrom is Write of what r holds, copied as it is read: a blob need
// not be in memory whole.
func WriteFrom(path string, r io.Reader) error {
	// Write through a symbolic link, not over it; a link that leads
	// nowhere is not replaced by a file either.
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		resolved, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("%s is a symbolic link that cannot be followed: %w", path, err)
		}
		path = resolved
	}
	perm := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return write(path, r, perm)
}

// Replace writes what r holds to a new file at path, as WriteFrom does,
// but never through what is there: a symbolic link at path is replaced by
// the file, not followed, and the file is 0644 whatever was there. It is
// for files in a directory whose content someone else may have planted,
// such as an image layout a build adds to: nothing outside it is written.
func Replace(path string, r io.Reader) error {
	if fi, err := os.Lstat(path); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", suggest.Show(path))
	}
	return write(path, r, 0o644)
}

// ReplaceIn is Replace for the file name, a slash-separated path inside
// root: the directories on its way are made and walked inside root, so
// that one planted as a link leading out of root is never written
// through, whatever is planted while it writes.
func ReplaceIn(root *os.Root, name string, r io.Reader) error {
	return writeIn(root, name, r, root.Rename)
}

// CreateIn writes r to the file name inside root, as ReplaceIn does, if
// nothing is there: what is there stays, and of two calls at once one
// makes the file, whole, and the other leaves it.
func CreateIn(root *os.Root, name string, r io.Reader) error {
	return writeIn(root, name, r, func(tmp, name string) error {
		err := root.Link(tmp, name)
		root.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	})
}

// writeIn writes r to a temporary file beside name inside root, then
// place puts it at name.
func writeIn(root *os.Root, name string, r io.Reader, place func(tmp, name string) error) (err error) {
	if fi, err := root.Lstat(name); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory", suggest.Show(name))
	}
	dir := path.Dir(name)
	if err := root.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var tmp string
	var f *os.File
	for range 100 {
		// Named as tempPattern names Write's, which RemoveStaleTempsIn
		// knows.
		tmp = path.Join(dir, "."+path.Base(name)+"."+strconv.FormatUint(uint64(rand.Uint32()), 10)+".tmp")
		f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return place(tmp, name)
}

// write writes r to a temporary file beside path, with permissions perm,
// and renames it over path, which a rename replaces whatever it is (a
// link included), but a directory.
func write(path string, r io.Reader, perm fs.FileMode) (err error) {
	if err := RemoveStaleTemps(path); err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, tempPattern(filepath.Base(path)))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, r); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// tempPattern is the os.CreateTemp pattern of Write's temporary files
// for a file named base: hidden, so that go build ignores them.
func tempPattern(base string) string { return "." + base + ".*.tmp" }

// RemoveStaleTemps removes the temporary files that Write, killed
// between creating and renaming one, left beside path. It removes only
// regular files named exactly as Write names them for path, where
// os.CreateTemp puts a decimal number in place of the "*"; anything else
// stays.
func RemoveStaleTemps(path string) error {
	dir, base := filepath.Split(path)
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range ents {
		if isTemp(e, base) {
			if err := os.Remove(filepath.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	return nil
}

// RemoveStaleTempsIn removes from the directory dir inside root the
// temporary files that Write or ReplaceIn, killed before renaming one,
// left there for the file base, or for any file if base is "": regular
// files named as tempPattern names them. It reads the directory 256 names
// at a time.
func RemoveStaleTempsIn(root *os.Root, dir, base string) error {
	return EachIn(root, dir, func(e fs.DirEntry) error {
		if !isTemp(e, base) {
			return nil
		}
		if err := root.Remove(path.Join(dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
}

// EachIn calls fn for each entry of the directory dir inside root, reading
// it 256 names at a time, until fn returns an error, which it returns. A
// directory that is not there has no entries.
func EachIn(root *os.Root, dir string, fn func(fs.DirEntry) error) error {
	d, err := root.Open(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			if err := fn(e); err != nil {
				return err
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// IsTemp reports whether e is a temporary file of a write here, of any
// file: a regular file named as tempPattern names them.
func IsTemp(e fs.DirEntry) bool { return isTemp(e, "") }

// isTemp reports whether e is a regular file named as tempPattern names
// the temporary files of a file named base, or of any file if base is "".
func isTemp(e fs.DirEntry, base string) bool {
	if !e.Type().IsRegular() {
		return false // a link or a directory is not Write's
	}
	rest, ok := strings.CutPrefix(e.Name(), ".")
	if !ok {
		return false
	}
	if rest, ok = strings.CutSuffix(rest, ".tmp"); !ok {
		return false
	}
	i := strings.LastIndexByte(rest, '.')
	if i < 0 || (base != "" && rest[:i] != base) || i == 0 {
		return false
	}
	digits := rest[i+1:]
	return digits != "" && strings.Trim(digits, "0123456789") == ""
}

// Resolve returns the absolute path abs with every symbolic link in it
// resolved. Trailing names that do not exist yet are kept as they are; a
// link that points nowhere is an error, since where a write through it
// would land is not known until it is made.
func Resolve(abs string) (string, error) {
	abs = filepath.Clean(abs)
	var rest []string
	for cur := abs; ; {
		real, err := filepath.EvalSymlinks(cur)
		if err == nil {
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		if fi, err := os.Lstat(cur); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			dest, _ := os.Readlink(cur)
			return "", fmt.Errorf("%s is a symbolic link to %s, which does not exist; remove the link, or make it point at a file inside the module", suggest.QuotePath(cur), suggest.QuotePath(dest))
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return abs, nil
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

// Within reports whether path, resolved as Resolve does, lies in the
// directory root, itself resolved; it returns the resolved path.
func Within(root, path string) (resolved string, ok bool, err error) {
	if resolved, err = Resolve(path); err != nil {
		return "", false, err
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", false, err
	}
	rel, err := filepath.Rel(realRoot, resolved)
	ok = err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
	return resolved, ok, nil
}

// OpenLocked opens the file at path for reading and writing, locked for
// writing as the go command locks go.mod, waiting for whoever holds the
// lock, or for ctx to end.
func OpenLocked(ctx context.Context, path string) (*lockedfile.File, error) {
	type locked struct {
		f   *lockedfile.File
		err error
	}
	got := make(chan locked, 1)
	go func() {
		f, err := lockedfile.OpenFile(path, os.O_RDWR, 0)
		got <- locked{f, err}
	}()
	select {
	case l := <-got:
		return l.f, l.err
	case <-ctx.Done():
		// The lock may still come; it is let go at once.
		go func() {
			if l := <-got; l.f != nil {
				l.f.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}
