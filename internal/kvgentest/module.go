package kvgentest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// GoMod is the go.mod of module modPath that requires this checkout of
// kvgen, replaced by its root.
func GoMod(t testing.TB, modPath string) string {
	t.Helper()
	return "module " + modPath + "\n\ngo 1.26.0\n\nrequire " + Path + " v0.0.0\n\nreplace " + Path + " => " + Root(t) + "\n"
}

// GoSum is the checkout's go.sum, which a module that requires the
// checkout needs as well.
func GoSum(t testing.TB) string {
	t.Helper()
	sum, err := os.ReadFile(filepath.Join(Root(t), "go.sum"))
	require.NoError(t, err)
	return string(sum)
}

// Module makes module modPath in a temporary directory, as WriteModule
// does, and returns the directory.
func Module(t testing.TB, modPath string, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	WriteModule(t, dir, modPath, files)
	return dir
}

// WriteModule writes module modPath in dir: files, by slash-separated
// path, then the checkout's go.sum, then GoMod last, so that a go.mod in
// dir says the module is complete.
func WriteModule(t testing.TB, dir, modPath string, files map[string]string) {
	t.Helper()
	WriteFiles(t, dir, files)
	WriteFiles(t, dir, map[string]string{"go.sum": GoSum(t)})
	WriteFiles(t, dir, map[string]string{"go.mod": GoMod(t, modPath)})
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
