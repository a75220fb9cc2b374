package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/tools/go/packages"
)

// A plugin module requires the contract's module as the host builds it,
// and builds without a proxy that serves the host's own version.
func TestPluginGoModRequiresTheContractsModule(t *testing.T) {
	root := t.TempDir()
	host, plugin := filepath.Join(root, "host"), filepath.Join(root, "vendors", "acme")
	const head = "module example.com/acme\n\ngo 1.26.0\n"
	for _, tc := range []struct {
		name     string
		contract *packages.Module
		want     string
	}{
		{"the standard library's", nil, head},
		{"a published version", &packages.Module{Path: "example.com/gw", Version: "v1.4.0"},
			head + "\nrequire example.com/gw v1.4.0\n"},
		{"the host's own", &packages.Module{Path: "example.com/host", Main: true, Dir: host},
			head + "\nrequire example.com/host v0.0.0-00010101000000-000000000000\n\nreplace example.com/host => ../../host\n"},
		{"replaced by a directory", &packages.Module{Path: "example.com/gw", Version: "v1.4.0", Replace: &packages.Module{Path: "../gw", Dir: filepath.Join(root, "gw")}},
			head + "\nrequire example.com/gw v1.4.0\n\nreplace example.com/gw => ../../gw\n"},
		{"replaced by a fork", &packages.Module{Path: "example.com/gw", Version: "v1.4.0", Replace: &packages.Module{Path: "example.com/fork", Version: "v1.4.1"}},
			head + "\nrequire example.com/gw v1.4.0\n\nreplace example.com/gw => example.com/fork v1.4.1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pluginGoMod("example.com/acme", tc.contract, plugin)
			require.NoError(t, err)
			assert.Equal(t, tc.want, string(got))
		})
	}
}
