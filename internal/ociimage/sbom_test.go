package ociimage

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/inspect"
)

// What SBOM writes of a binary is pinned by testdata/sbom.cdx.json:
// inspect -sbom checks an image's SBOM by making it again (describes), so
// a change to what SBOM writes makes the SBOM of every image built before
// it an error there. Such a change is made on purpose: write the file
// again with KVGEN_WRITE_SBOM=1, and say in CHANGELOG.md that older
// images' SBOMs are refused.
func TestSBOMFormatIsPinned(t *testing.T) {
	bin := &inspect.Binary{
		Info: &debug.BuildInfo{
			GoVersion: "go1.26.8",
			Path:      "example.com/host/cmd/host",
			Main:      debug.Module{Path: "example.com/host", Version: "v1.2.3", Sum: "h1:bWFpbg=="},
			Deps: []*debug.Module{
				{Path: "github.com/kvgen/kvgen", Version: "v0.9.0", Sum: "h1:a3ZnZW4="},
				{Path: "example.com/conn/redis", Version: "v0.4.1", Sum: "h1:cmVkaXM=",
					Replace: &debug.Module{Path: "example.com/fork/redis", Version: "v0.4.2", Sum: "h1:Zm9yaw=="}},
			},
			Settings: []debug.BuildSetting{
				{Key: "-trimpath", Value: "true"}, {Key: "GOOS", Value: "linux"}, {Key: "GOARCH", Value: "amd64"},
				{Key: "CGO_ENABLED", Value: "0"}, {Key: "-ldflags", Value: "-s -w"}, {Key: "vcs.revision", Value: "abc123"},
			},
		},
		Registries: []inspect.Description{{
			Manifest: "connectors.yaml", ManifestSHA256: "5f0c", Package: "example.com/host/cmd/host",
			Entries: []inspect.Entry{
				{Name: "redis", Aliases: []string{"valkey"}, Roles: []string{"producer", "consumer"}, Import: "example.com/conn/redis", Constructor: "New",
					Module: "example.com/conn/redis", Version: "v0.4.1", Sum: "h1:cmVkaXM="},
				{Name: "memory", Import: "example.com/host/memory", Constructor: "New", Module: "example.com/host"},
			},
		}},
	}
	got, err := SBOM(bin, "v0.9.0")
	require.NoError(t, err)
	file := filepath.Join("testdata", "sbom.cdx.json")
	if os.Getenv("KVGEN_WRITE_SBOM") == "1" {
		require.NoError(t, os.WriteFile(file, got, 0o644))
	}
	want, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, string(want), string(got), "what SBOM writes changed: see this test's comment")
	require.NoError(t, describes(want, bin), "the pinned SBOM describes its binary")
}
