package gomod

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVendorLacks(t *testing.T) {
	dir := tree(t, map[string]string{
		"go.mod": "module example.com/host\n\ngo 1.26.0\n\nrequire (\n\texample.com/a v0.1.0\n\texample.com/b v0.2.0\n\texample.com/c v0.1.0\n\texample.com/d v0.1.0\n\texample.com/e v0.1.0\n)\n\nreplace example.com/c => ../c\n",
		"vendor/modules.txt": "# example.com/a v0.1.0\n## explicit; go 1.26.0\nexample.com/a\n" +
			"# example.com/b v0.1.0\n## explicit\n" +
			"# example.com/c v0.1.0 => ../c\n## explicit\n" +
			"# example.com/d v0.1.0\n" +
			"# example.com/x => ../x\n",
	})
	main, err := ReadMain(filepath.Join(dir, "go.mod"))
	require.NoError(t, err)
	assert.True(t, main.Vendored([]string{"GOWORK=off", "GOFLAGS= "}))
	assert.False(t, main.Vendored([]string{"GOWORK=off", "GOFLAGS=-mod=readonly"}))
	lacks, err := main.VendorLacks(nil)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"example.com/b v0.2.0 (it has v0.1.0)",
		"example.com/d v0.1.0 (it has it only as a dependency of another module)",
		"example.com/e v0.1.0",
	}, lacks)

	lacks, err = main.VendorLacks([]byte("module example.com/host\n\ngo 1.26.0\n\nrequire example.com/c v0.1.0\n\nreplace example.com/c => ../c2\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"example.com/c v0.1.0 => ../c2 (it has v0.1.0 => ../c)"}, lacks)
}

func TestNotCached(t *testing.T) {
	nc := NotCached("go get: example.com/kv@v0.9.0: module lookup disabled by GOPROXY=off", "", "")
	require.NotNil(t, nc)
	assert.Equal(t, &NotCachedError{Module: "example.com/kv", Version: "v0.9.0"}, nc)
	assert.Equal(t, &NotCachedError{Module: "example.com/kv", Version: "v0.2.0"}, NotCached("module lookup disabled by GOPROXY=off", "example.com/kv", "v0.2.0"))
	// A dependency's, at a file position: the go command's words stay.
	assert.Nil(t, NotCached("package example.com/conn does not build: example.com/missing: conn/conn.go:6:2: module lookup disabled by GOPROXY=off", "example.com/conn", "v0.1.0"))
}
