package pipeline_test

import (
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
	"github.com/kvgen/kvgen/internal/pipeline"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/*/want")

// TestGolden runs every case under testdata/: a module holding
// connectors.yaml and the connectors' packages. A case whose want/ holds
// errors.txt must fail with exactly those errors; any other case must
// generate want/<output file>, which is then compiled, and run when the
// case has a want/stdout.
func TestGolden(t *testing.T) {
	cases, err := filepath.Glob("testdata/*/connectors.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	for _, c := range cases {
		src, _ := filepath.Abs(filepath.Dir(c))
		name := filepath.Base(src)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := caseModule(t, src)
			// The first run loads the connectors by name and fills a check
			// cache; the full run makes a second (secondRunAgrees).
			opts, cache := pipeline.Options{WorkDir: dir, Env: os.Environ(), Manifest: "connectors.yaml"}, t.TempDir()
			res, err := generateCached(opts, cache, "golden")
			if !testing.Short() {
				secondRunAgrees(t, opts, cache, res, err)
			}
			wantDir := filepath.Join(src, "want")
			if wantErrs := filepath.Join(wantDir, "errors.txt"); exists(wantErrs) || (*update && err != nil) {
				require.Error(t, err, "the case expects errors")
				golden(t, wantErrs, []byte(err.Error()+"\n"))
				return
			}
			require.NoError(t, err)
			golden(t, filepath.Join(wantDir, filepath.Base(res.Path)), res.Content)

			wrote, err := res.Write()
			require.NoError(t, err)
			assert.True(t, wrote)
			pkgDir := "./" + filepath.ToSlash(filepath.Dir(res.Path))
			if wantOut := filepath.Join(wantDir, "stdout"); exists(wantOut) || (*update && res.Package == "main") {
				out := goCmd(t, dir, "run", pkgDir)
				golden(t, wantOut, out)
				return
			}
			goCmd(t, dir, "build", "./...")
		})
	}
}

// secondRunAgrees runs Generate again with the cache the first run
// (res, err) filled, loading through the loader package, as a list of
// patterns too long for one go list run is loaded, and fails unless it
// comes out the same to the byte, errors included: the cache answers for
// the constructors that passed, and the rest are checked again from the
// loader's listing.
func secondRunAgrees(t *testing.T, opts pipeline.Options, cache string, res *pipeline.Result, err error) {
	t.Helper()
	cres, cerr := generateCached(pipeline.ThroughLoader(opts), cache, "golden")
	if err != nil {
		require.Error(t, cerr, "warm run through the loader")
		assert.Equal(t, err.Error(), cerr.Error(), "warm run through the loader")
		return
	}
	require.NoError(t, cerr, "warm run through the loader")
	assert.Equal(t, string(res.Content), string(cres.Content), "warm run through the loader: output must be byte-identical")
	assert.Equal(t, res.Entries, cres.Entries, "warm run through the loader")
}

// cwd is the current directory, for tests that run there.
func cwd(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	return dir
}

// caseModule copies a case and the shared packages into a temporary module
// that requires this checkout of kvgen.
func caseModule(t *testing.T, src string) string {
	t.Helper()
	dir := kvgentest.Module(t, "example.com/kvcase", nil)
	copyTree(t, filepath.Join(kvgentest.Root(t), "internal", "pipeline", "testdata", "_shared"), dir)
	copyTree(t, src, dir)
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "want")))
	return dir
}

func copyTree(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	require.NoError(t, err)
}

func goCmd(t *testing.T, dir string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	var stderr string
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = string(ee.Stderr)
	}
	require.NoError(t, err, "go %s:\n%s", strings.Join(args, " "), stderr)
	return out
}

// golden compares got with the file at path, or rewrites it with -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "missing golden file; run go run ./internal/regen")
	assert.Equal(t, string(want), string(got))
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
