package main

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// publishedGet is the README's one step the script cannot take: there is
// no published kvgen to fetch; the script uses this checkout the way the
// README says to use an unpublished one.
const publishedGet = "go get -tool github.com/kvgen/kvgen/cmd/kvgen"

var fence = regexp.MustCompile("(?s)```(\\w+)\n(.*?)```")

// TestReadme keeps testdata/script/readme.txtar the README's own steps:
// each command of "Using kvgen in your module" runs in the script, in the
// README's order, with this checkout for ../kvgen; the manifest and the
// program are the README's, byte for byte.
func TestReadme(t *testing.T) {
	data, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	readme := string(data)
	start := strings.Index(readme, "## Using kvgen in your module")
	require.GreaterOrEqual(t, start, 0, "README has no section Using kvgen in your module")
	section := readme[start:]
	if end := strings.Index(section[1:], "\n## "); end >= 0 {
		section = section[:end+1]
	}
	if end := strings.Index(section, "\n### "); end >= 0 {
		section = section[:end]
	}

	ar, err := txtar.ParseFile("testdata/script/readme.txtar")
	require.NoError(t, err)
	files := map[string]string{}
	for _, f := range ar.Files {
		files[f.Name] = string(f.Data)
	}
	var commands []string
	for _, l := range strings.Split(string(ar.Comment), "\n") {
		if c, ok := strings.CutPrefix(l, "exec "); ok {
			commands = append(commands, c)
		}
	}

	var want []string
	var sawYAML, sawGo bool
	for _, m := range fence.FindAllStringSubmatch(section, -1) {
		switch lang, text := m[1], m[2]; lang {
		case "sh":
			for _, l := range strings.Split(text, "\n") {
				if l = strings.TrimSpace(l); l != "" && l != publishedGet {
					want = append(want, strings.ReplaceAll(l, "../kvgen", "$ROOT"))
				}
			}
		case "yaml":
			assert.Equal(t, text, files["readme/connectors.yaml"], "the README's manifest")
			sawYAML = true
		case "go":
			assert.Equal(t, text, files["readme/main.go"], "the README's program")
			sawGo = true
		}
	}
	assert.True(t, sawYAML && sawGo, "the section shows a manifest and a program")
	require.NotEmpty(t, want)
	i := 0
	for _, c := range commands {
		if i < len(want) && c == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Errorf("readme.txtar does not run the README's step %q (after the ones before it)", want[i])
	}
}
