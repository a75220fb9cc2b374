package main

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stream is go test -json of a package with a failing test, a passing one,
// a script skipped for its platform and one skipped for -short.
const stream = `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestFails"}
{"Action":"output","Package":"p","Test":"TestFails","Output":"=== RUN   TestFails\n"}
{"Action":"output","Package":"p","Test":"TestFails","Output":"    x_test.go:9: got 1, want 2\n"}
{"Action":"output","Package":"p","Test":"TestFails","Output":"--- FAIL: TestFails (0.00s)\n"}
{"Action":"fail","Package":"p","Test":"TestFails"}
{"Action":"output","Package":"p","Test":"TestPasses","Output":"    x_test.go:12: quiet on success\n"}
{"Action":"pass","Package":"p","Test":"TestPasses"}
{"Action":"output","Package":"p","Test":"TestScripts/fifo","Output":"        > [!unix] skip 'FIFOs'\n"}
{"Action":"skip","Package":"p","Test":"TestScripts/fifo"}
{"Action":"output","Package":"p","Test":"TestScripts/slow","Output":"        > [!exec:sh] skip 'the blocks are shell'\n"}
{"Action":"output","Package":"p","Test":"TestScripts/slow","Output":"        > [short] skip 'builds whole programs'\n"}
{"Action":"skip","Package":"p","Test":"TestScripts/slow"}
{"ImportPath":"q [q.test]","Action":"build-output","Output":"q/x.go:3:1: syntax error\n"}
{"Action":"output","Package":"p","Output":"FAIL\tp\t0.01s\n"}
{"Action":"fail","Package":"p"}
`

func TestReportPrintsWhatGoTestPrints(t *testing.T) {
	out, tl := runReport(t, false)
	assert.Equal(t, tally{passed: 1, failed: 1, skipped: 2}, tl)
	assert.Contains(t, out, "x_test.go:9: got 1, want 2\n--- FAIL: TestFails")
	assert.NotContains(t, out, "=== RUN", "progress lines, which go test prints only with -v")
	assert.Contains(t, out, "q/x.go:3:1: syntax error\n")
	assert.Contains(t, out, "FAIL\tp\t0.01s\n")
	assert.NotContains(t, out, "quiet on success", "a passing test's output, as without -v")
	assert.NotContains(t, out, "SKIP")
}

// A script that reached a platform's skip line, whose condition did not
// hold, and then skipped for -short skipped for -short.
func TestReportFailsSkipsInCIButThePlatformsOwn(t *testing.T) {
	out, tl := runReport(t, true)
	assert.Equal(t, 1, tl.badSkips)
	assert.Contains(t, out, "SKIP in CI: p TestScripts/slow\n")
	assert.NotContains(t, out, "TestScripts/fifo")
}

// runReport runs report over stream and returns what it printed.
func runReport(t *testing.T, ci bool) (string, tally) {
	t.Helper()
	var out strings.Builder
	var tl tally
	require.NoError(t, report(&out, strings.NewReader(stream), ci, &tl))
	return out.String(), tl
}

// The root module's run leaves out cmd/kvgen, which runs alone before it,
// and keeps every other package, this one included.
func TestPackagesButLeavesOutOnlyThatOne(t *testing.T) {
	before, gitErr := os.Stat("../../.git")
	pkgs, err := packagesBut("../..", alone["."])
	require.NoError(t, err)
	if gitErr == nil {
		// go list ran no git status there, which would rewrite .git
		// and have go test run again the tests that read the checkout.
		after, err := os.Stat("../../.git")
		require.NoError(t, err)
		assert.Equal(t, before.ModTime(), after.ModTime(), ".git changed")
	}
	assert.NotContains(t, pkgs, "github.com/kvgen/kvgen/cmd/kvgen")
	assert.Contains(t, pkgs, "github.com/kvgen/kvgen/internal/testall")
	assert.Contains(t, pkgs, "github.com/kvgen/kvgen/registry")
	assert.NotContains(t, pkgs, "github.com/kvgen/kvgen/internal/gen/bench", "its files are for runs without -race only")
}
