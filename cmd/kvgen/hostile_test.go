package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kvgen/kvgen/internal/inspect"
	"github.com/kvgen/kvgen/internal/kvgentest"
)

// hostile is an argument that, printed as it is, would color the
// terminal, start a second line that looks like kvgen's, and reverse what
// follows.
const hostile = "\x1b[31m\nkvgen: fake\u202e"

// Every command, given a hostile argument where it takes one (a flag's
// value, a positional argument, a flag's name, a file named so), says so
// in lines of printable text: the argument is quoted or escaped, never
// printed as it is.
func TestHostileArgumentsStayText(t *testing.T) {
	t.Chdir(kvgentest.Module(t, "example.com/hostile", map[string]string{
		"connectors.yaml":      "version: 1\noutput: host/connectors_gen.go\nconnectors: []\n",
		hostile + ".yaml":      "version: 1\noutput: host/connectors_gen.go\nconnectors: []\n",
		"host/main.go":         "package main\n\nfunc main() {}\n",
		"notbinary/" + hostile: "not a binary",
		"appended/README":      "a directory of binaries",
	}))
	t.Setenv("KVGENCACHE", "off")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("notbinary", "go-"+hostile), data, 0o755); err != nil {
		t.Fatal(err)
	}
	// A Go binary with a description appended that says hostile things.
	enc, err := inspect.Encode(inspect.Description{
		Manifest: hostile + ".yaml", ManifestSHA256: hostile, Package: "evil\x1b[2J\x1b[H\u009b\x7f",
		Entries: []inspect.Entry{{Name: hostile, Aliases: []string{hostile}, Roles: []string{hostile}, Import: hostile, Constructor: hostile, Module: hostile}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("appended", hostile), append(data, enc...), 0o755); err != nil {
		t.Fatal(err)
	}

	build := []string{"build", "-manifest", "connectors.yaml", "-o", "bin/x"}
	for _, args := range [][]string{
		{"-manifest", hostile},
		{"generate", "-manifest", hostile},
		{"generate", "-o", hostile},
		{"generate", "-tags", hostile, "-manifest", hostile},
		{"generate", "-" + hostile},
		{"generate", hostile},
		{"check", "-manifest", hostile},
		{"check", "-o", hostile},
		{"list", "-manifest", hostile},
		{"list", "-" + hostile},
		{"doc", "-manifest", hostile},
		{"doc", "-manifest", hostile + ".yaml"},
		{"build", "-manifest", hostile, "-o", "bin/x", "./host"},
		append(build, "./"+hostile),
		append(build, hostile),
		append(build, "-for", hostile, "./host"),
		append(build, "-for", "{"+hostile, "./host"),
		append(build, "-for", `{"kv_connector":`+jsonString(hostile)+`}`, "./host"),
		append(build, "-target", hostile, "./host"),
		{"build", "-manifest", "connectors.yaml", "-o", hostile, "-target", "linux/amd64", "-target", "linux/arm64", "./host"},
		append(build[:3:3], "-image", hostile, "./host"),
		append(build[:3:3], "-image", "oci:"+hostile+":"+hostile, "./host"),
		append(build[:3:3], "-image", "oci:img", "-base", hostile, "./host"),
		append(build[:3:3], "-image", "oci:img", "-base", "oci:"+hostile, "./host"),
		append(build[:3:3], "-image", "oci:img", "-ca-bundle", hostile, "./host"),
		append(build[:3:3], "-image", "oci:img", "-image-label", hostile, "./host"),
		{"inspect", hostile},
		{"inspect", "oci:" + hostile},
		{"inspect", "docker-archive:" + hostile},
		{"inspect", "-sbom", "example.com/" + hostile},
		{"inspect", filepath.Join("notbinary", hostile)},
		{"inspect", "notbinary"},
		{"inspect", "-json", "notbinary"},
		{"inspect", "appended"},
		{"inspect", "-json", "appended"},
		{"new", hostile},
		{"new", "acme", "-module", hostile},
		{"new", "acme", "-factory", hostile},
		{"new", "acme", "-dir", hostile},
		{"new", "acme", "-dir", hostile}, // now it exists
		{"schema", hostile},
		{"version", hostile},
		{"version", "-" + hostile},
		{"help", hostile},
		{hostile},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, &stdout, &stderr)
		t.Logf("kvgen %q: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
		for name, out := range map[string]string{"stdout": stdout.String(), "stderr": stderr.String()} {
			if !utf8.ValidString(out) {
				t.Errorf("kvgen %q: %s is not UTF-8: %q", args, name, out)
			}
			for _, r := range out {
				if r != '\n' && r != '\t' && !strconv.IsPrint(r) {
					t.Errorf("kvgen %q: %s holds %U: %q", args, name, r, out)
					break
				}
			}
			if strings.Contains(out, "\nkvgen: fake") || strings.HasPrefix(out, "kvgen: fake") {
				t.Errorf("kvgen %q: %s has a forged line: %q", args, name, out)
			}
		}
	}
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return string(b)
}
