package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"

	"github.com/kvgen/kvgen/internal/link"
)

// A plugin module requires the contract's module as the host builds it,
// replaces what the host replaces (so that the contract's own dependencies
// resolve as they do for the host), and builds without a proxy that
// serves the host's own version.
func TestPluginGoModBuildsAsTheHostDoes(t *testing.T) {
	root := t.TempDir()
	hostDir, plugin := filepath.Join(root, "host"), filepath.Join(root, "vendors", "acme")
	require.NoError(t, os.MkdirAll(hostDir, 0o755))
	hostMod := "module example.com/host\n\ngo 1.26.0\n\nrequire example.com/gw v1.4.0\n\n" +
		"replace example.com/util => ../util\n\nreplace example.com/acme => ../acme-old\n"
	require.NoError(t, os.WriteFile(filepath.Join(hostDir, "go.mod"), []byte(hostMod), 0o644))
	host, err := link.ReadMain(filepath.Join(hostDir, "go.mod"))
	require.NoError(t, err)
	const head = "module example.com/acme\n\ngo 1.26.0\n"
	// The host's own replacement of the plugin's path is left out.
	const hostReplaces = "\nreplace example.com/util => ../../util\n"
	for _, tc := range []struct {
		name     string
		contract *packages.Module
		host     *link.Main
		want     string
	}{
		{"the standard library's, outside any module", nil, nil, head},
		{"the standard library's", nil, host, head + hostReplaces},
		{"a published version", &packages.Module{Path: "example.com/gw", Version: "v1.4.0"}, host,
			head + "\nrequire example.com/gw v1.4.0\n" + hostReplaces},
		{"the host's own", &packages.Module{Path: "example.com/host", Main: true, Dir: hostDir}, host,
			head + "\nrequire example.com/host v0.0.0-00010101000000-000000000000\n" + hostReplaces + "\nreplace example.com/host => ../../host\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pluginGoMod("example.com/acme", tc.contract, tc.host, plugin)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
	// A plugin module of the contract's path, or of the host's, would
	// require itself.
	for _, path := range []string{"example.com/gw", "example.com/host"} {
		_, err := pluginGoMod(path, &packages.Module{Path: "example.com/gw", Version: "v1.4.0"}, host, plugin)
		assert.ErrorContains(t, err, "give the plugin module its own")
	}
}
