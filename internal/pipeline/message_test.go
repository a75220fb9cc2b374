package pipeline_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/pipeline"
)

// A manifest value is shown quoted, and every error is one line of
// printable text, whichever stage reports it: an escape sequence in a
// value cannot reach the terminal, and a newline cannot forge an error
// line of its own.
func TestErrorsAreOneLineOfPrintableText(t *testing.T) {
	guardModule(t, "reg_gen.go")
	manifest := "version: 1\npackage: kvcase\noutput: reg_gen.go\nconnectors:\n" +
		"  - name: a\n    import: example.com/a\n    replace: \"../x\\e[2J\"\n" +
		"  - name: b\n    import: example.com/b\n    replace: \"../y\\nconnectors.yaml:1:1: forged\"\n" +
		"  - name: c\n    import: \"example.com/c\\e[2J\"\n" +
		"  - name: \"d\\nconnectors.yaml:1:1: forged\"\n    import: example.com/d\n    \"\\e[2J\\n\": 1\n"
	require.NoError(t, os.WriteFile("connectors.yaml", []byte(manifest), 0o644))

	_, err := pipeline.Generate(context.Background(), pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml"})
	require.Error(t, err)
	text := err.Error()
	lines := strings.Split(text, "\n")
	assert.Len(t, lines, len(diag.Flatten(err)), "one line per problem:\n%s", text)
	for _, l := range lines {
		assert.Regexp(t, `^connectors\.yaml:\d+:\d+: `, l)
		assert.NotRegexp(t, `^connectors\.yaml:1:1: forged`, l, "a newline must not start a line of its own")
	}
	assert.NotRegexp(t, "[\x00-\x09\x0b-\x1f\x7f]", text, "no control characters but the line breaks between errors")
	assert.Contains(t, text, `../x\x1b[2J`)
	assert.Contains(t, text, `../y\nconnectors.yaml:1:1: forged`)
	assert.Contains(t, text, `import "example.com/c\x1b[2J"`)
	assert.Contains(t, text, `unknown key "\x1b[2J\n"`)
}

// A directory of Options.Output, which the file-name rules leave to the
// caller, is quoted too.
func TestOutputFlagIsQuoted(t *testing.T) {
	guardModule(t, "reg_gen.go")
	out := t.TempDir() + "/x\x1b[2J\n/reg_gen.go"
	_, err := pipeline.Generate(context.Background(), pipeline.Options{WorkDir: cwd(t), Env: os.Environ(), Manifest: "connectors.yaml", Output: out})
	require.Error(t, err)
	assert.NotRegexp(t, "[\x00-\x1f\x7f]", err.Error())
	assert.Contains(t, err.Error(), `x\x1b[2J\n/reg_gen.go" is outside the module`)
}

// A connector's package that does not compile is reported at its import:
// key, then the compiler's errors a line each, as go build shows them, at
// their places as the user's working directory reaches them: the go
// command names them from the directory it loads in, here the manifest's.
func TestCompileErrorsAreLinesOfTheirOwn(t *testing.T) {
	src, err := filepath.Abs("testdata/err_pkg_not_compile")
	require.NoError(t, err)
	dir := caseModule(t, src)
	work, name := filepath.Dir(dir), filepath.Base(dir)
	opts := pipeline.Options{WorkDir: work, Env: os.Environ(), Manifest: filepath.Join(name, "connectors.yaml")}
	_, err = pipeline.Generate(context.Background(), opts)
	require.Error(t, err)
	lines := strings.Split(err.Error(), "\n")
	require.Len(t, lines, 2, err.Error())
	assert.Equal(t, filepath.Join(name, "connectors.yaml")+`:5:13: connector "broken": package "example.com/kvcase/broken" does not compile`, lines[0])
	file := filepath.Join(name, "broken", "broken.go")
	assert.Equal(t, file+":10:9: undefined: undefinedThing", lines[1])
	assert.FileExists(t, filepath.Join(work, file), "the place shown, from the working directory")

	problems := diag.Flatten(err)
	require.Len(t, problems, 1, "one problem, which quotes the compiler")
	data, err := json.Marshal(problems[0])
	require.NoError(t, err)
	assert.JSONEq(t, `{"file": "`+filepath.Join(name, "connectors.yaml")+`", "line": 5, "column": 13,
		"message": "connector \"broken\": package \"example.com/kvcase/broken\" does not compile",
		"related": [{"file": "`+file+`", "line": 10, "column": 9, "message": "undefined: undefinedThing"}]}`, string(data))
}
