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
