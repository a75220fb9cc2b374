// Package atomicfile writes files so that a failed or killed write leaves
// the old file intact: every file kvgen writes goes through Write.
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Write writes data to path atomically: it writes a temporary file in
// the same directory and renames it over path, so a failed or killed run
// leaves the old file intact. An existing file keeps its permissions, and
// a symbolic link keeps pointing at the file, which is replaced. The
// temporary files that an earlier Write of path, killed before its
// rename, left behind are removed first.
func Write(path string, data []byte) (err error) {
	// Write through a symbolic link, not over it; a link that leads
	// nowhere is not replaced by a file either.
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		resolved, err := filepath.EvalSymlinks(path)
		if err != nil {
			return fmt.Errorf("%s is a symbolic link that cannot be followed: %w", path, err)
		}
		path = resolved
	}
	if err := RemoveStaleTemps(path); err != nil {
		return err
	}
	perm := fs.FileMode(0o644)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	} else if !errors.Is(err, fs.ErrNotExist) {
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
	if _, err = tmp.Write(data); err != nil {
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
	prefix, suffix, _ := strings.Cut(tempPattern(base), "*")
	for _, e := range ents {
		n := e.Name()
		rnd, ok := strings.CutPrefix(n, prefix)
		if !ok {
			continue
		}
		if rnd, ok = strings.CutSuffix(rnd, suffix); !ok || rnd == "" || strings.Trim(rnd, "0123456789") != "" {
			continue
		}
		if !e.Type().IsRegular() {
			continue // a link or a directory is not Write's
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}
