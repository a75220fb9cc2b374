package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"io"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/deploy"
	"github.com/kvgen/kvgen/internal/diag"
)

// A report's list is written an item at a time, as the items come, and
// the rest of the report when it ends: fields in the order they were
// first set, then problems.
func TestReportStreamsItsList(t *testing.T) {
	var out bytes.Buffer
	r := jsonReport{w: &out}
	r.set("binaries", []any{})
	r.set("file", nil)
	r.item("binaries", map[string]int{"a": 1})
	assert.Equal(t, "{\n  \"binaries\": [\n    {\n      \"a\": 1\n    }", out.String(), "the first item, before the report ends")
	r.item("binaries", json.RawMessage(`{"b":[2]}`))
	assert.Error(t, r.item("binaries", json.RawMessage(`not JSON`)))
	r.set("file", "f.go")
	require.NoError(t, r.end())
	assert.Equal(t, `{
  "binaries": [
    {
      "a": 1
    },
    {
      "b": [
        2
      ]
    }
  ],
  "file": "f.go",
  "problems": []
}
`, out.String())
	assert.True(t, json.Valid(out.Bytes()))
}

// Without items, the list is the field set for it; nil leaves a field out.
func TestReportWithoutItems(t *testing.T) {
	var out bytes.Buffer
	r := jsonReport{w: &out}
	r.set("binaries", []any{})
	r.set("file", nil)
	require.NoError(t, r.end())
	assert.Equal(t, "{\n  \"binaries\": [],\n  \"problems\": []\n}\n", out.String())
}

// Problems reported one at a time are shown as one list is: the first
// ten, then how many more; each in the one shape, escaped as text is.
func TestReportProblems(t *testing.T) {
	var out, stderr bytes.Buffer
	e := &env{stdout: &out, stderr: &stderr, ctx: context.Background(), asJSON: true}
	e.json.w = &out
	var l diag.List
	for i := 1; i <= 6; i++ {
		l.Add(token.Position{Filename: "connectors.yaml", Line: i, Column: 3}, "problem %d", i)
	}
	e.report(l.Err())
	e.report(problemIn("gen.go", "gen.go is missing"))
	e.report(inFile("bin/x", errors.New("bin/x: unrecognized file format")))
	e.errorf("hostile \x1b[31m\u009b %s", "text")
	e.report(fmt.Errorf("wrapped: %w", diag.Errorf(token.Position{}, "at no position")))
	for i := 0; i < 3; i++ {
		e.errorf("more %d", i)
	}
	e.json.set("file", "evil\u202e.go")
	require.NoError(t, e.json.end())
	assert.Empty(t, stderr.String())
	var got struct {
		File     string
		Problems []map[string]any
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &got))
	assert.Equal(t, "evil\u202e.go", got.File)
	require.Len(t, got.Problems, 11)
	assert.Equal(t, map[string]any{"file": "connectors.yaml", "line": 1.0, "column": 3.0, "message": "problem 1"}, got.Problems[0])
	assert.Equal(t, map[string]any{"file": "gen.go", "message": "gen.go is missing"}, got.Problems[6])
	assert.Equal(t, map[string]any{"file": "bin/x", "message": "bin/x: unrecognized file format"}, got.Problems[7])
	assert.Equal(t, map[string]any{"message": `hostile \x1b[31m\u009b text`}, got.Problems[8])
	assert.Equal(t, map[string]any{"message": "wrapped: at no position"}, got.Problems[9])
	assert.Equal(t, map[string]any{"message": "... and 3 more problems"}, got.Problems[10])
	assert.Contains(t, out.String(), `"evil\u202e.go"`, "escaped, not as it is")
}

// Text reports are as ever: one line each on stderr, nothing on stdout.
func TestReportAsText(t *testing.T) {
	var out, stderr bytes.Buffer
	e := &env{stdout: &out, stderr: &stderr, ctx: context.Background()}
	e.report(diag.Errorf(token.Position{Filename: "connectors.yaml", Line: 2, Column: 3}, "positioned"))
	e.report(inFile("bin/x", errors.New("bin/x: unrecognized file format")))
	e.errorf("plain")
	assert.Empty(t, out.String())
	assert.Equal(t, "connectors.yaml:2:3: positioned\nkvgen: bin/x: unrecognized file format\nkvgen: plain\n", stderr.String())
}

// A failed go build is reported as the go command wrote it, a line each,
// under kvgen's line with what the error wraps it in: tabs kept, what is
// not printable escaped, a Windows line end dropped, a line that would
// pass for kvgen's own marked as the go command's, and past 500 lines
// (what -v printed of the packages compiled, say) the last 500. With
// -json it is one message.
func TestGoBuildFailureKeepsItsLines(t *testing.T) {
	var lines []string
	for i := range 600 {
		lines = append(lines, fmt.Sprintf("example.com/dep%d", i))
	}
	lines = append(lines, "# example.com/host", "main.go:3:9: undefined: Registr\r",
		"main.go:6:2: not enough arguments in call to f", "\thave ()", "\twant (int)",
		"evil\x1b[2J.go:1:1: \u202eesrever", "kvgen: wrote bin/srv (3 entries):1:2: undefined: x")
	err := fmt.Errorf("building the image: %w", &deploy.GoError{Verb: "build", Err: errors.New("exit status 1"), Output: strings.Join(lines, "\n") + "\n"})
	var stderr bytes.Buffer
	e := &env{stdout: io.Discard, stderr: &stderr, ctx: context.Background()}
	e.report(err)
	got := strings.Split(strings.TrimSuffix(stderr.String(), "\n"), "\n")
	require.Len(t, got, 1+1+maxGoLines)
	assert.Equal(t, []string{"kvgen: building the image: go build: exit status 1", "... (107 lines before)", "example.com/dep107"}, got[:3])
	assert.Equal(t, []string{
		"# example.com/host",
		"main.go:3:9: undefined: Registr",
		"main.go:6:2: not enough arguments in call to f",
		"\thave ()",
		"\twant (int)",
		`evil\x1b[2J.go:1:1: \u202eesrever`,
		"go: kvgen: wrote bin/srv (3 entries):1:2: undefined: x",
	}, got[len(got)-7:])

	// No more than 256 KiB of it, however long its lines.
	stderr.Reset()
	e.report(&deploy.GoError{Verb: "build", Err: errors.New("exit status 1"), Output: strings.Repeat(strings.Repeat("x", 10<<10)+"\n", 100)})
	assert.Less(t, stderr.Len(), maxGoBytes+1024)
	assert.Contains(t, stderr.String(), "lines before)")

	// A run that said nothing says no more than kvgen's line.
	stderr.Reset()
	e.report(&deploy.GoError{Verb: "build", Err: errors.New("signal: killed")})
	assert.Equal(t, "kvgen: go build: signal: killed\n", stderr.String())

	var out bytes.Buffer
	e = &env{stdout: &out, stderr: io.Discard, ctx: context.Background(), asJSON: true}
	e.json.w = &out
	e.report(err)
	require.NoError(t, e.json.end())
	var report struct{ Problems []struct{ Message string } }
	require.NoError(t, json.Unmarshal(out.Bytes(), &report))
	require.Len(t, report.Problems, 1)
	assert.NotContains(t, report.Problems[0].Message, "\n")
	assert.True(t, strings.HasPrefix(report.Problems[0].Message, `building the image: go build: exit status 1\nexample.com/dep0\n`), report.Problems[0].Message[:80])
}

// A message that carries megabytes from outside (a registry's token
// realm, in its client's error) prints its first 16 KiB and its length.
func TestLongMessageIsCut(t *testing.T) {
	var stderr bytes.Buffer
	e := &env{stdout: io.Discard, stderr: &stderr, ctx: context.Background()}
	e.report(fmt.Errorf("fetching a token from %s: refused", strings.Repeat("é", 4<<20)))
	assert.Less(t, stderr.Len(), maxLine+100)
	assert.True(t, regexp.MustCompile(`^kvgen: fetching a token from (é)+\.\.\. \(8388639 bytes\)\n$`).MatchString(stderr.String()), "the message, cut: %.100q...", stderr.String())
}

// An SBOM comes from a registry, which may be hostile: printed as text, it
// is JSON still, and what would move a terminal's cursor is escaped.
func TestSBOMTextIsEscaped(t *testing.T) {
	var out bytes.Buffer
	w := &binaryWriter{e: &env{stdout: &out}}
	require.NoError(t, w.sbom([]byte("{\"name\":\t\"a\u009b2Jb\u202e\"}\n")))
	assert.Equal(t, "{\n  \"name\": \"a\\u009b2Jb\\u202e\"\n}\n", out.String())
	var v map[string]string
	require.NoError(t, json.Unmarshal(out.Bytes(), &v))
	assert.Equal(t, "a\u009b2Jb\u202e", v["name"])
	assert.Error(t, w.sbom([]byte("not JSON")))
}

// Bytes that are no UTF-8 (an 8-bit CSI, 0xff) leave as \ufffd, in text
// and in a -json report alike: the output is valid UTF-8 JSON.
func TestSBOMInvalidUTF8IsEscaped(t *testing.T) {
	sbom := []byte("{\"name\": \"a\x9b2Jb\xff\"}")
	var text bytes.Buffer
	require.NoError(t, (&binaryWriter{e: &env{stdout: &text}}).sbom(sbom))
	assert.Equal(t, "{\n  \"name\": \"a\\ufffd2Jb\\ufffd\"\n}\n", text.String())

	var report bytes.Buffer
	e := &env{stdout: &report, asJSON: true}
	e.json.w = &report
	require.NoError(t, (&binaryWriter{e: e, list: "sboms"}).sbom(sbom))
	require.NoError(t, e.json.end())
	assert.True(t, utf8.Valid(report.Bytes()), "%q", report.String())
	var v struct{ SBOMs []map[string]string }
	require.NoError(t, json.Unmarshal(report.Bytes(), &v), report.String())
	assert.Equal(t, "a\ufffd2Jb\ufffd", v.SBOMs[0]["name"])
}

// B3: a small SBOM nested deep, which re-indented would print as
// gigabytes, is refused, its indented size bounded from its tokens before
// it is indented; in a -json report, which is indented too, as in text.
func TestSBOMNestedDeepIsRefusedBeforeIndenting(t *testing.T) {
	deep := []byte(strings.Repeat("[", 30000) + strings.Repeat("]", 30000))
	// Shallow but wide: a million tokens at depth 63.
	wide := []byte(strings.Repeat("[", 63) + strings.Repeat("1,", 1<<20) + "1" + strings.Repeat("]", 63))
	for _, asJSON := range []bool{false, true} {
		var out bytes.Buffer
		e := &env{stdout: &out, asJSON: asJSON}
		e.json.w = &out
		w := &binaryWriter{e: e, list: "sboms"}
		require.ErrorContains(t, w.sbom(deep), "nested more than 64 deep")
		require.ErrorContains(t, w.sbom(wide), "more than 67108864 bytes once indented")
		assert.Empty(t, out.String())
	}
}

// FuzzSBOM prints any bytes as an image's SBOM, in text and in a -json
// report: no panic; what prints is valid UTF-8, JSON, and within the
// bound an indented SBOM's tokens give it; and memory stays in proportion.
func FuzzSBOM(f *testing.F) {
	f.Add([]byte(`{"bomFormat":"CycloneDX","components":[{"name":"a\u009b"}]}`))
	f.Add([]byte("[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]"))
	f.Add([]byte("{\"a\":\"\xff\x9b\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, asJSON := range []bool{false, true} {
			var out bytes.Buffer
			e := &env{stdout: &out, asJSON: asJSON}
			e.json.w = &out
			var err error
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			err = (&binaryWriter{e: e, list: "sboms"}).sbom(data)
			if err == nil && asJSON {
				err = e.json.end()
			}
			runtime.ReadMemStats(&after)
			if err != nil {
				continue
			}
			bound := int64(len(data))*(2*maxSBOMDepth+2) + 64
			if int64(out.Len()) > bound {
				t.Fatalf("printed %d bytes of %d", out.Len(), len(data))
			}
			if a := after.TotalAlloc - before.TotalAlloc; a > uint64(16*bound)+1<<20 {
				t.Fatalf("allocated %d bytes for %d", a, len(data))
			}
			if !utf8.Valid(out.Bytes()) || !json.Valid(out.Bytes()) {
				t.Fatalf("printed %q", out.String())
			}
		}
	})
}

// What inspect takes for an image: a reference with a registry host, or
// an oci: or docker-archive: name; a path, even one that does not exist,
// is a file, so that a mistyped ./bin/srv is not looked up on the network.
func TestImageRef(t *testing.T) {
	for name, want := range map[string]bool{
		"registry.example/team/kvserver:edge":                       true,
		"localhost:5000/kvserver":                                   true,
		"127.0.0.1:5000/kvserver@sha256:" + strings.Repeat("a", 64): true,
		"oci:layout":         true,
		"./missing/h":        false,
		"../missing/h":       false,
		"./h":                false,
		"bin/srv":            false,
		"/nonexistent/x/srv": false,
	} {
		_, got := imageRef(name)
		assert.Equal(t, want, got, name)
	}
}
