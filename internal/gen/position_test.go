package gen

import (
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/diag"
)

// TestPositionOpens checks that a declaration is shown by a path an editor
// opens from the working directory, never by the package's import path.
func TestPositionOpens(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "host")
	below := filepath.Join(work, "conn", "conn.go")
	beside := filepath.Join(root, "fastkv", "extra_ctors.go")
	for _, f := range []string{below, beside} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		require.NoError(t, os.WriteFile(f, []byte("package x\n"), 0o644))
	}
	show := func(work, file string, files ...string) string {
		p := position(token.Position{Filename: file, Line: 41, Column: 3}, "example.com/acme/fastkv", files, diag.ShortPath(work))
		assert.Zero(t, p.Column, "export data has no columns")
		return p.Filename
	}
	assert.Equal(t, filepath.Join("conn", "conn.go"), show(work, below))
	assert.Equal(t, filepath.Join("..", "fastkv", "extra_ctors.go"), show(work, beside))
	// Export data compiled with -trimpath names the file by module path.
	assert.Equal(t, filepath.Join("..", "fastkv", "extra_ctors.go"), show(work, "example.com/acme/fastkv@v0.1.0/extra_ctors.go", beside))
	// From so deep that "../" repeated is longer, the path is absolute,
	// as the go command shows it.
	deep := filepath.Join(work, strings.Repeat("d/", 100))
	require.NoError(t, os.MkdirAll(deep, 0o755))
	assert.Equal(t, beside, show(deep, beside))
}
