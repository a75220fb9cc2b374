// Package gofiles lists the Go files of a directory, as the go command
// tells them apart: source files, and test files ending in _test.go.
package gofiles

import (
	"os"
	"strings"
)

// In returns the names of the Go files in dir, sorted: the source files,
// and the test files. Directories named like Go files are not files.
// Which files build constraints select is for go/build to say.
func In(dir string) (src, tests []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		switch n := e.Name(); {
		case e.IsDir() || !strings.HasSuffix(n, ".go"):
		case strings.HasSuffix(n, "_test.go"):
			tests = append(tests, n)
		default:
			src = append(src, n)
		}
	}
	return src, tests, nil
}
