package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// schemaCase is a manifest, whether kvgen accepts it, and whether the
// schema is to agree: where kvgen's reason is one a schema cannot state
// (names unique across entries, say), it does not.
type schemaCase struct {
	name  string
	yaml  string
	valid bool // what kvgen says
	agree bool // whether the schema says the same
	// key and value, for a case of one key's value.
	key, value string
}

// schemaValueCases are one key's value each, that kvgen accepts or
// refuses, and the schema with it.
func schemaValueCases() []schemaCase {
	top := func(key, value string) string {
		return "version: 1\n" + key + ": " + value + "\nconnectors: []\n"
	}
	entry := func(key, value string) string {
		return "version: 1\nconnectors:\n  - name: c\n    import: example.com/c\n    " + key + ": " + value + "\n"
	}
	pin := func(key, value string) string {
		return "version: 1\nextends: base.yaml\npin:\n  - name: c\n    " + key + ": " + value + "\n"
	}
	var cases []schemaCase
	add := func(valid bool, doc func(string, string) string, key string, values ...string) {
		for _, v := range values {
			cases = append(cases, schemaCase{name: key + ": " + v, yaml: doc(key, v), valid: valid, agree: true, key: key, value: v})
		}
	}
	add(true, entry, "version", "v1.4.0", "v0.0.0-20240101000000-abcdef123456", "v1.2.3-rc.1", "v1.2.3-0.a-b.9", "v2.0.0+incompatible", "v10.20.30")
	add(false, entry, "version", `"1.2"`, "v1.2", "v1", "v1.2.3+meta", "v01.2.3", "v1.2.3-01", "v1.2.3-", `"1.2.3"`, "latest", "V1.2.3")
	add(true, pin, "version", "v1.4.0")
	add(false, pin, "version", `"1.2"`, "v1.2")
	add(true, top, "factory", "example.com/gateway/plugin.Factory", "gopkg.in/yaml.v3.Node", "example.com/a.b.Type", "plug.F", "example.com/x/v2.T_2")
	add(false, top, "factory", "example.com/plug", "example.com/plug.factory", "example.com/plug.", "example.com/plug/.T", "-x/y.T", "example.com//y.T", "example.com/ y.T", "/x.T", "example.com/a./b.T")
	add(true, top, "output", "connectors_gen.go", "srv/connectors_gen.go", "./x.go", "gen/x_windows_gen.go", "windows.go", "x_unix.go", "amd64/x.go", "x_amd64x.go", `"a b/c (1).go"`)
	add(false, top, "output", "x.txt", "x_test.go", "/abs/x.go", "../x.go", "..", "x_linux.go", "srv/x_windows.go", "x_linux_amd64.go", "connectors_js_gen_js.go", ".x.go", "_x.go", `'a\b.go'`, `"x*.go"`, "C:/x.go", `"x?.go"`, "x.go/", "a/../../x.go")
	add(true, top, "package", "connectors", "main", "_x", "X9")
	add(false, top, "package", "func", "_", "9x", `"a-b"`, "a.b")
	add(true, top, "extends", "../connectors.yaml", "base.yaml", "../../x/y.yaml")
	add(false, top, "extends", "/etc/x.yaml", "C:/x.yaml", `'a\b.yaml'`, "./x.yaml", "a/../x.yaml", "a//x.yaml", "x/")
	add(true, entry, "replace", "../kvredis", "cors", ".", "..")
	add(false, entry, "replace", "/abs", "./x", "a/./b", "x/..")
	add(true, entry, "constructor", "New", "NewV2_x")
	add(false, entry, "constructor", "new", "New()", "pkg.New", `"N ew"`)
	add(true, entry, "description", "Redis, for KV that hosts share", `"über \"all\" — 'quoted'"`, strings.Repeat("x", MaxDescription))
	add(false, entry, "description", `"a\nb"`, `"a\tb"`, `"a\u0085b"`, `"a\u2028b"`, `"a\u202Eb"`, `"a\u2066b"`, strings.Repeat("x", MaxDescription+1))
	imports := func(valid bool, values ...string) {
		for _, v := range values {
			doc := "version: 1\nconnectors:\n  - name: c\n    import: " + v + "\n"
			cases = append(cases, schemaCase{name: "import: " + v, yaml: doc, valid: valid, agree: true, key: "import", value: v})
		}
	}
	imports(true, "gopkg.in/yaml.v3", "plug", "example.com/a+b/.x/y~z")
	imports(false, `"example.com/a b"`, "-x/y", "example.com/x.", "example.com//x", "example.com/x/", "/x", "example.com/..")
	// The list's two spellings: either one, not both, not neither.
	for _, c := range []schemaCase{
		{name: "plugins", yaml: "version: 1\nplugins:\n  - name: c\n    import: example.com/c\n", valid: true},
		{name: "plugins, bad entry", yaml: "version: 1\nplugins:\n  - name: c\n    import: /c\n"},
		{name: "plugins and connectors", yaml: "version: 1\nplugins: []\nconnectors: []\n"},
		{name: "neither list", yaml: "version: 1\n"},
		{name: "plugins, extending", yaml: "version: 1\nextends: base.yaml\nplugins: []\n", valid: true},
	} {
		c.agree = true
		cases = append(cases, c)
	}
	return cases
}

// TestSchemaAgreesWithKVGen validates manifests with the JSON Schema
// validator of Python's jsonschema (Debian's python3-jsonschema), as an
// editor would: the schema's own cases, every manifest in the repository
// and in the command's test scripts that kvgen accepts, and gen's golden
// error cases whose problems a schema can state.
func TestSchemaAgreesWithKVGen(t *testing.T) {
	python := jsonschemaPython(t)
	cases := schemaValueCases()
	cases = append(cases, repositoryManifests(t)...)
	var docs []any
	var checked []schemaCase
	for _, c := range cases {
		_, err := Parse(file, []byte(c.yaml))
		if (err == nil) != c.valid {
			t.Errorf("%s: kvgen says %v, the case says valid=%v", c.name, err, c.valid)
			continue
		}
		var doc any
		if err := yaml.Unmarshal([]byte(c.yaml), &doc); err != nil {
			require.False(t, c.valid, "%s: %v", c.name, err)
			continue // not YAML: no schema applies
		}
		if _, err := json.Marshal(doc); err != nil {
			require.False(t, c.valid, "%s: %v", c.name, err)
			continue // a mapping with keys that are not strings
		}
		docs = append(docs, doc)
		checked = append(checked, c)
	}
	results := validate(t, python, docs)
	require.Len(t, results, len(checked))
	for i, c := range checked {
		schemaValid := len(results[i]) == 0
		want := c.valid == c.agree // the schema's verdict, if it agrees
		if !c.agree {
			want = true // a schema cannot tell: it accepts
		}
		if schemaValid != want {
			t.Errorf("%s: kvgen valid=%v, schema valid=%v %q\n%s", c.name, c.valid, schemaValid, results[i], c.yaml)
		}
	}
	t.Logf("validated %d manifests", len(checked))
}

// refusedBySchema says, for each of gen's golden error cases whose
// manifest kvgen refuses, whether the schema refuses it too.
var refusedBySchema = map[string]bool{
	"err_manifest_many":        true,  // names, an unknown key, a role, an import path, a constructor
	"err_manifest_and_types":   true,  // a name
	"err_ctor_unexported":      true,  // a constructor
	"err_contract_mismatch":    false, // roles: only without factory:, a rule across keys
	"err_duplicate_name_alias": false, // names unique across entries: beyond a schema
	"err_yaml_syntax":          false, // not YAML
}

// repositoryManifests returns the manifests of the repository: its YAML
// files and the YAML files of the command's test scripts.
func repositoryManifests(t *testing.T) []schemaCase {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	var cases []schemaCase
	addFile := func(name string, data []byte) {
		if !bytes.Contains(data, []byte("connectors:")) && !bytes.Contains(data, []byte("extends:")) {
			return // not a manifest
		}
		_, perr := Parse(file, data)
		c := schemaCase{name: name, yaml: string(data), valid: perr == nil, agree: true}
		if dir, ok := strings.CutPrefix(filepath.ToSlash(filepath.Dir(name)), "internal/pipeline/testdata/"); ok && perr != nil {
			agree, listed := refusedBySchema[dir]
			if !listed {
				t.Errorf("%s: kvgen refuses it (%v); say in refusedBySchema whether the schema can", name, perr)
				return
			}
			c.agree = agree
		} else if perr != nil {
			return // refused for a reason the test does not track
		}
		cases = append(cases, c)
	}
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		switch {
		case !d.Type().IsRegular():
		case strings.HasSuffix(path, ".yaml"):
			data, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			addFile(rel, data)
		case strings.HasSuffix(path, ".txtar") && strings.Contains(filepath.ToSlash(rel), "testdata/script/"):
			ar, err := txtar.ParseFile(path)
			if err != nil {
				return err
			}
			for _, f := range ar.Files {
				if strings.HasSuffix(f.Name, ".yaml") {
					addFile(rel+":"+f.Name, f.Data)
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, cases)
	return cases
}

// validatorScript validates each instance against the schema, and prints
// a list of each one's errors.
const validatorScript = `
import json, sys
import jsonschema
d = json.load(sys.stdin)
jsonschema.Draft202012Validator.check_schema(d["schema"])
v = jsonschema.Draft202012Validator(d["schema"])
print(json.dumps([[e.message for e in v.iter_errors(i)] for i in d["instances"]]))
`

func validate(t *testing.T, python string, docs []any) [][]string {
	t.Helper()
	in, err := json.Marshal(map[string]any{"schema": json.RawMessage(Schema()), "instances": docs})
	require.NoError(t, err)
	cmd := exec.Command(python, "-c", validatorScript)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "%s", stderr.String())
	var results [][]string
	require.NoError(t, json.Unmarshal(out, &results))
	return results
}

// jsonschemaPython returns a python3 that has the jsonschema module, or
// skips the test when there is none, which fails it in CI.
func jsonschemaPython(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(p)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import jsonschema; jsonschema.Draft202012Validator").Run() == nil {
			return path
		}
	}
	msg := "no python3 with the jsonschema module (Debian: apt-get install python3-jsonschema) to validate manifests against the schema"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// TestSchemaPatternsInGo checks the patterns that Go's regexp package can
// compile against kvgen, without Python: the same cases.
func TestSchemaPatternsInGo(t *testing.T) {
	for key, pattern := range patterns {
		re, err := regexp.Compile(pattern)
		if err != nil {
			continue // lookaheads: Python's test has them
		}
		n := 0
		for _, c := range schemaValueCases() {
			if c.key != key {
				continue
			}
			var s string
			if err := yaml.Unmarshal([]byte(c.value), &s); err != nil {
				continue // not a string: the schema's type refuses it
			}
			assert.Equal(t, c.valid, re.MatchString(s), "%s", c.name)
			n++
		}
		assert.NotZero(t, n, "cases for %s", key)
	}
}

// TestKnownSystems checks the GOOS and GOARCH names of the output pattern
// against go/build, which kvgen asks, and against the systems the go
// command builds for.
func TestKnownSystems(t *testing.T) {
	for _, name := range slices.Concat(knownOS, knownArch) {
		assert.NotEmpty(t, systemSuffix("x_"+name+".go"), "go/build reads %s in a file name", name)
	}
	out, err := exec.Command("go", "tool", "dist", "list").Output()
	var ee *exec.ExitError
	if errors.As(err, &ee) || errors.Is(err, exec.ErrNotFound) {
		t.Skipf("go tool dist list: %v", err)
	}
	require.NoError(t, err)
	for _, line := range strings.Fields(string(out)) {
		goos, goarch, _ := strings.Cut(line, "/")
		assert.Contains(t, knownOS, goos)
		assert.Contains(t, knownArch, goarch)
	}
}
