package pipeline

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A cache file holding null where a build record goes, which kvgen never
// writes, costs that record and nothing else: no run stops on it.
func TestCacheFileWithNullRecords(t *testing.T) {
	dir := t.TempDir()
	path := OpenCache(dir, "kvgen test").forManifest("/m/connectors.yaml", "out.go").path
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(`{"entries":null,"warm":null,"builds":[null,{"key":"k","content":"c"},null]}`), 0o644))

	c := OpenCache(dir, "kvgen test").forManifest("/m/connectors.yaml", "out.go")
	assert.Nil(t, c.built("another"))
	require.NotNil(t, c.built("k"))
	assert.Nil(t, c.warm())
	c.setBuilt("new", &warmRecord{Key: "new"})
	assert.Equal(t, "new", c.built("new").Key)
}
