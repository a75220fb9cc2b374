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

var fence = regexp.MustCompile("(?s)```(\\w+)\n(.*?)```")

// TestReadme keeps two scripts the README's own steps: each command of
// "Using kvgen in your module" runs in them, in the README's order, and
// the manifest and the program are the README's, byte for byte. The
// section's first shell block adds a published kvgen (readme_published),
// its second a checkout instead (readme, with this checkout for ../kvgen);
// the blocks after them are common to both.
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

	var shell [][]string
	var manifest, program string
	for _, m := range fence.FindAllStringSubmatch(section, -1) {
		switch lang, text := m[1], m[2]; lang {
		case "sh":
			var cmds []string
			for _, l := range strings.Split(text, "\n") {
				if l = strings.TrimSpace(l); l != "" {
					cmds = append(cmds, strings.ReplaceAll(l, "../kvgen", "$ROOT"))
				}
			}
			shell = append(shell, cmds)
		case "yaml":
			manifest = text
		case "go":
			program = text
		}
	}
	require.GreaterOrEqual(t, len(shell), 3, "the section's shell blocks: published kvgen, checkout, common steps")
	require.NotEmpty(t, manifest, "the section shows a manifest")
	require.NotEmpty(t, program, "the section shows a program")
	var common []string
	for _, b := range shell[2:] {
		common = append(common, b...)
	}

	for script, first := range map[string][]string{"readme_published": shell[0], "readme": shell[1]} {
		t.Run(script, func(t *testing.T) {
			ar, err := txtar.ParseFile("testdata/script/" + script + ".txtar")
			require.NoError(t, err)
			files := map[string]string{}
			for _, f := range ar.Files {
				files[f.Name] = string(f.Data)
			}
			assert.Equal(t, manifest, files["readme/connectors.yaml"], "the README's manifest")
			assert.Equal(t, program, files["readme/main.go"], "the README's program")

			want := append(append([]string(nil), first...), common...)
			i := 0
			for _, l := range strings.Split(string(ar.Comment), "\n") {
				if c, ok := strings.CutPrefix(l, "exec "); ok && i < len(want) && c == want[i] {
					i++
				}
			}
			if i < len(want) {
				t.Errorf("%s.txtar does not run the README's step %q (after the ones before it)", script, want[i])
			}
		})
	}
}
