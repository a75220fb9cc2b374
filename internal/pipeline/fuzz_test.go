package pipeline

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/manifest"
)

// FuzzWrite feeds manifests to the pipeline's last step: where the file
// goes and whether kvgen may write it. A manifest that parses either has
// its registry file written inside the module, or is refused with nothing
// written. (What the file holds is gen.FuzzGenerate's.)
func FuzzWrite(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*/connectors.yaml")
	require.NoError(f, err)
	for _, s := range seeds {
		data, err := os.ReadFile(s)
		require.NoError(f, err)
		f.Add(data)
	}
	for _, output := range []string{`"x\u202egen.go"`, `"x\npackage evil.go"`, `"x*/.go"`, "../../outside.go", "a/b/c/reg_gen.go", "/etc/passwd.go", "vendor/x/gen.go"} {
		f.Add([]byte("version: 1\noutput: " + output + "\nconnectors: []\n"))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := manifest.Parse("connectors.yaml", data)
		if err != nil {
			return // the manifest's own problems: gen.FuzzGenerate
		}
		dir := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module example.com/kvcase\n"), 0o644))
		path := filepath.Join(dir, filepath.FromSlash(m.Output.V))
		target := &outputFile{path: path, abs: path, root: dir, pkg: &outputPackage{name: "kvcase", declared: map[string]bool{}}}
		res := &Result{manifest: m, Package: "kvcase", Path: path, file: target, Content: []byte("package kvcase\n")}
		err = target.writable(m)
		if err == nil {
			_, err = res.Write()
		}
		if err != nil {
			ents, rerr := os.ReadDir(dir)
			require.NoError(t, rerr)
			require.Len(t, ents, 1, "a refused output writes nothing; found %v after: %v", ents, err)
			return
		}
		got, err := os.ReadFile(res.Path)
		require.NoError(t, err)
		require.Equal(t, res.Content, got)
		rel, err := filepath.Rel(dir, res.file.resolved)
		require.NoError(t, err)
		require.False(t, rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)), "written outside the module: %s", res.file.resolved)
	})
}
