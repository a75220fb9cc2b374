package link

import (
	"errors"
	"go/token"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/gocmd"
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
	lacks, err := main.vendorLacks(nil)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"example.com/b v0.2.0 (it has v0.1.0)",
		"example.com/d v0.1.0 (it has it only as a dependency of another module)",
		"example.com/e v0.1.0",
	}, lacks)

	lacks, err = main.vendorLacks([]byte("module example.com/host\n\ngo 1.26.0\n\nrequire example.com/c v0.1.0\n\nreplace example.com/c => ../c2\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"example.com/c v0.1.0 => ../c2 (it has v0.1.0 => ../c)"}, lacks)
}

// A version no module proxy has is said so at the entry's version:, with
// the command that lists the versions there are; the go command's words
// follow. Other failures keep its words alone.
func TestNoSuchVersionIsSaid(t *testing.T) {
	pos := token.Position{Filename: "connectors.yaml", Line: 6, Column: 14}
	p := &Plan{Lacks: []Lack{{Pos: pos, Label: `connector "fastkv"`, Import: "example.com/acme/fastkv", Version: "v0.9.9"}}}
	for _, reply := range []string{
		"reading https://proxy.golang.org/example.com/acme/fastkv/@v/v0.9.9.info: 404 Not Found\n\tserver response: not found: example.com/acme/fastkv@v0.9.9: invalid version: unknown revision v0.9.9",
		"reading https://proxy.example/example.com/acme/fastkv/@v/v0.9.9.info: 410 Gone",
		"reading file:///proxy/example.com/acme/fastkv/@v/v0.9.9.info: no such file or directory",
	} {
		err := p.annotate(&gocmd.Error{Args: []string{"get"}, Stderr: "go: example.com/acme/fastkv@v0.9.9: " + reply, Err: errors.New("exit status 1")})
		assert.Regexp(t, `^connectors.yaml:6:14: connector "fastkv": there is no version v0.9.9 of example.com/acme/fastkv; go list -m -versions example.com/acme/fastkv lists those there are \(go get: example.com/acme/fastkv@v0.9.9: reading `, err.Error())
	}
	for _, reply := range []string{
		"verifying module: checksum mismatch",
		// A private module the checksum database does not know: GOPRIVATE.
		"verifying module: example.com/acme/fastkv@v0.9.9: reading https://sum.golang.org/lookup/example.com/acme/fastkv@v0.9.9: 404 Not Found",
		// A version that does not fit the module path: /v2.
		"invalid version: module contains a go.mod file, so module path must match major version",
	} {
		err := p.annotate(&gocmd.Error{Args: []string{"get"}, Stderr: "go: example.com/acme/fastkv@v0.9.9: " + reply, Err: errors.New("exit status 1")})
		assert.Equal(t, `connectors.yaml:6:14: connector "fastkv": go get: example.com/acme/fastkv@v0.9.9: `+reply, err.Error())
	}
	// A repository without that revision, fetched direct.
	err := p.annotate(&gocmd.Error{Args: []string{"get"}, Stderr: "go: example.com/acme/fastkv@v0.9.9: invalid version: unknown revision v0.9.9", Err: errors.New("exit status 1")})
	assert.Contains(t, err.Error(), "there is no version v0.9.9 of example.com/acme/fastkv")
}
