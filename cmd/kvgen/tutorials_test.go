package main

import (
	"errors"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// madeRE finds the files a shell command of a tutorial writes: a
// redirection's target, or -o's.
var madeRE = regexp.MustCompile(`(?:>|\s-o)\s+'?([^\s'{}]+)'?`)

// The tutorials of the examples (their READMEs) leave nothing git would
// commit: what they write is ignored, so that a build after them is not
// +dirty and an image built from the checkout keeps its digest.
func TestTutorialsLeaveNothingToCommit(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not found")
	}
	root := kvgentest.Root(t)
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout")
	}
	readmes, err := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	require.NoError(t, err)
	made := 0
	for _, readme := range readmes {
		data, err := os.ReadFile(readme)
		require.NoError(t, err)
		doc := filepath.ToSlash(must(filepath.Rel(root, readme)))
		dir := path.Dir(doc)
		blocks, _ := parseDoc(doc, string(data))
		for _, b := range blocks {
			if b.lang != "sh" {
				continue
			}
			for _, m := range madeRE.FindAllStringSubmatch(b.text, -1) {
				file := path.Join(dir, m[1])
				made++
				cmd := exec.Command("git", "check-ignore", "-q", "--no-index", file)
				cmd.Dir = root
				err := cmd.Run()
				if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && ee.ExitCode() == 1 {
					t.Errorf("%s: the tutorial writes %s, which git does not ignore", b, file)
					continue
				}
				assert.NoError(t, err, "git check-ignore %s", file)
			}
		}
	}
	require.Positive(t, made, "found no file the tutorials write: is the pattern reading them?")
}

// A path of the repository that an example's README names, in backquotes,
// is there; a manifest entry's replace: in a README that says which
// directory the manifest is in holds the connector's module.
func TestExampleReadmesNameWhatIsThere(t *testing.T) {
	root := kvgentest.Root(t)
	readmes, err := filepath.Glob(filepath.Join(root, "examples", "*", "*", "README.md"))
	require.NoError(t, err)
	more, err := filepath.Glob(filepath.Join(root, "examples", "*", "README.md"))
	require.NoError(t, err)
	named := 0
	for _, readme := range append(readmes, more...) {
		data, err := os.ReadFile(readme)
		require.NoError(t, err)
		doc := filepath.ToSlash(must(filepath.Rel(root, readme)))
		for _, m := range repoPathRE.FindAllStringSubmatch(string(data), -1) {
			named++
			_, err := os.Stat(filepath.Join(root, filepath.FromSlash(m[1])))
			assert.NoError(t, err, "%s names `%s`", doc, m[1])
		}
		dirs := manifestDirRE.FindStringSubmatch(string(data))
		if dirs == nil {
			continue
		}
		blocks, _ := parseDoc(doc, string(data))
		for _, b := range blocks {
			for _, r := range replaceRE.FindAllStringSubmatch(b.text, -1) {
				named++
				_, err := os.Stat(filepath.Join(root, filepath.FromSlash(dirs[1]), filepath.FromSlash(r[1]), "go.mod"))
				assert.NoError(t, err, "%s: replace: %s, from %s", b, r[1], dirs[1])
			}
		}
	}
	require.Positive(t, named, "found no path the examples' READMEs name")

	// Without redis-server the Redis tests fail unless this skips them
	// (examples/external/redis/internal/redistest): the connector's README says so.
	redis, err := os.ReadFile(filepath.Join(root, "examples", "external", "redis", "README.md"))
	require.NoError(t, err)
	assert.Contains(t, string(redis), "unless `KVGEN_SKIP_REDIS=1` skips")
}

var (
	// repoPathRE is a path of the repository in backquotes.
	repoPathRE = regexp.MustCompile("`(examples/[^`\\s]*)`")
	// manifestDirRE is where a README says its manifest is.
	manifestDirRE = regexp.MustCompile("manifest[^`]*under\\s+`(examples/[^`]+)`")
	replaceRE     = regexp.MustCompile(`(?m)^\s*replace:\s*(\S+)`)
)
