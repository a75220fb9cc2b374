package gen

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rogpeppe/go-internal/diff"
)

// WriteFile writes data to path atomically: it writes a temporary file in
// the same directory and renames it over path, so a failed or killed run
// leaves the old file intact. An existing file keeps its permissions, and
// a symbolic link keeps pointing at the file, which is replaced.
func WriteFile(path string, data []byte) (err error) {
	// Write through a symbolic link, not over it.
	if resolved, err := filepath.EvalSymlinks(path); err == nil {
		path = resolved
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
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
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

func unifiedDiff(path string, old, new []byte) []byte {
	return diff.Diff(path+" (committed)", old, path+" (generated)", new)
}
