package gocmd

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/kvgen/kvgen/internal/readfile"
)

// CheckModuleFiles checks the files that the go command, run in dir with
// env, reads before anything else: the main module's go.mod (the first
// found in dir or above it, as the go command finds it), its go.sum, and
// the go.work of workspace mode. Each must be a regular file of at most
// readfile.Max bytes: the go command reads a FIFO there until it blocks
// forever, and /dev/zero until it runs out of memory. kvgen checks them
// as it checks the files it reads itself, and says which is wrong.
func CheckModuleFiles(dir string, env []string) error {
	if dir == "" {
		dir = "."
	}
	if gomod := findUp(dir, "go.mod"); gomod != "" {
		if err := checkFile(gomod); err != nil {
			return fmt.Errorf("the main module's go.mod: %w", err)
		}
		if err := checkFile(filepath.Join(filepath.Dir(gomod), "go.sum")); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("the main module's go.sum: %w", err)
		}
	}
	work := Lookup(env, "GOWORK")
	switch work {
	case "off":
		return nil
	case "":
		work = findUp(dir, "go.work")
	}
	if work != "" {
		if err := checkFile(work); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("the workspace's go.work: %w", err)
		}
	}
	return nil
}

// findUp returns the first file named name in dir or above it that is not
// a directory, as the go command looks for go.mod and go.work, or "".
func findUp(dir, name string) string {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	for {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		} else if _, lerr := os.Lstat(p); lerr == nil && err != nil {
			return p // a link that leads nowhere: the go command fails on it too
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// checkFile checks that path is a regular file of at most readfile.Max
// bytes, without reading it.
func checkFile(path string) error {
	f, err := readfile.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() > readfile.Max {
		return &readfile.TooLargeError{Path: path, Limit: readfile.Max}
	}
	return nil
}

// GoModFile returns the go.mod that governs dir, as the go command finds
// it from there, or "" if there is none.
func GoModFile(dir string) string { return findUp(dir, "go.mod") }

// WorkFile returns the go.work that puts the go command, run in dir with
// env, in workspace mode, or "" when it runs in module mode.
func WorkFile(dir string, env []string) string {
	switch work := Lookup(env, "GOWORK"); work {
	case "off":
		return ""
	case "":
		return findUp(dir, "go.work")
	default:
		return work
	}
}

// ModuleRoot returns the directory of the go.mod that governs dir, or ""
// if there is none.
func ModuleRoot(dir string) string {
	if f := GoModFile(dir); f != "" {
		return filepath.Dir(f)
	}
	return ""
}
