package deploy_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// testBuildErrors runs kvgen build with manifests that cannot build and
// checks that each error points into the manifest and that no binary is
// written.
func testBuildErrors(t *testing.T, root, kvgen string) {
	cases := []struct {
		name     string
		manifest string
		dirs     []string // empty directories beside the manifest
		want     string   // follows the manifest's path in stderr
	}{
		{
			name: "replace names a directory without go.mod",
			manifest: `version: 1
connectors:
  - name: redis
    import: github.com/kvgen/kvgen/examples/external/redis
    version: v0.1.0
    replace: nomod
`,
			dirs: []string{"nomod"},
			want: `:6:14: connector "redis": replace "nomod": no go.mod in `,
		},
		{
			name: "import of a package that does not exist",
			manifest: `version: 1
connectors:
  - name: memory
    import: github.com/kvgen/kvgen/examples/connectors/memory
  - name: ghost
    import: github.com/kvgen/kvgen/examples/connectors/ghost
    constructor: New
`,
			want: `:6:13: connector "ghost": `,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			manifest := filepath.Join(dir, "deploy.yaml")
			require.NoError(t, os.WriteFile(manifest, []byte(tc.manifest), 0o644))
			for _, d := range tc.dirs {
				require.NoError(t, os.Mkdir(filepath.Join(dir, d), 0o755))
			}
			bin := filepath.Join(dir, "kvserver")

			// The go command must not look for the missing package in a
			// module proxy: the answer would depend on the network.
			res := kvgentest.Run(t, kvserverDir(root), []string{goFlags(), "GOPROXY=off"}, kvgentest.BuildTimeout,
				kvgen, "build", "-manifest", manifest, "-o", bin, ".")
			assert.Equal(t, 1, res.Code, "exit code; stderr:\n%s", res.Stderr)
			assert.Contains(t, res.Stderr, manifest+tc.want)
			assert.NoFileExists(t, bin)
		})
	}
}
