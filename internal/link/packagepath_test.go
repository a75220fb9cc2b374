package link

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The output package's import path follows from the main module's path,
// except outside the module and in a module nested in it.
func TestPackagePath(t *testing.T) {
	root := t.TempDir()
	main := &Main{Dir: root, GoMod: filepath.Join(root, "go.mod"), Path: "example.com/m"}
	require.NoError(t, os.MkdirAll(filepath.Join(root, "srv", "gen"), 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(root, "nested", "srv"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "nested", "go.mod"), []byte("module example.com/nested\n"), 0o644))

	assert.Equal(t, "example.com/m", main.packagePath(root))
	assert.Equal(t, "example.com/m/srv/gen", main.packagePath(filepath.Join(root, "srv", "gen")))
	assert.Empty(t, main.packagePath(filepath.Join(root, "nested", "srv")), "in a nested module")
	assert.Empty(t, main.packagePath(filepath.Join(root, "nested")), "a nested module's root")
	assert.Empty(t, main.packagePath(filepath.Dir(root)), "outside the module")
	assert.Empty(t, main.packagePath(root+"-sibling"), "outside, though the name starts alike")
}
