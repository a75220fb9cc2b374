// Package moduletest makes throwaway Go modules for tests: a directory of
// files whose go.mod requires a checkout of kvgen.
package moduletest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// New makes module modPath in a temporary directory: a go.mod that
// requires the kvgen checkout at root (replaced by it), the checkout's
// go.sum, and files, by slash-separated path. It returns the directory.
func New(t testing.TB, root, modPath string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	gomod := "module " + modPath + "\n\ngo 1.26.0\n\nrequire github.com/kvgen/kvgen v0.0.0\n\nreplace github.com/kvgen/kvgen => " + root + "\n"
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	require.NoError(t, err)
	WriteFiles(t, dir, map[string]string{"go.mod": gomod, "go.sum": string(sum)})
	WriteFiles(t, dir, files)
	return dir
}

// WriteFiles writes files, by slash-separated path, under dir.
func WriteFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
}
