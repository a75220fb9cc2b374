package main

import (
	"context"
	"fmt"
	"io/fs"
	"iter"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/pipeline"
)

// The documents whose blocks TestDocs runs and whose links TestDocLinks
// follows: the README and everything in docs/, relative to the
// repository's root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	more, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	for _, f := range more {
		files = append(files, filepath.ToSlash(must(filepath.Rel(root, f))))
	}
	return files
}

// docBlock is a fenced code block of a document.
type docBlock struct {
	file    string // the document, relative to the root
	line    int    // the line of its opening fence
	lang    string // what follows the opening fence
	text    string // its lines, without the fences' indentation
	section string // the ## heading it is under
	// notRun is the reason a <!-- not run: REASON --> comment just before
	// the block gives; marked says there is one.
	notRun string
	marked bool
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d: %s block", b.file, b.line, b.lang) }

var (
	fenceRE    = regexp.MustCompile("^( *)(```+)(.*)$")
	notRunRE   = regexp.MustCompile(`^\s*<!--\s*not run:(.*?)-->\s*$`)
	markerRE   = regexp.MustCompile(`<!--\s*not run`)
	listItemRE = regexp.MustCompile(`^( *)([-*+]|\d+[.)]) +`)
)

// docLangs are the languages a block may say it is in. Shell is sh and
// nothing else, so that every shell block is one TestDocs checks.
var docLangs = []string{"sh", "yaml", "json", "go", "text"}

// parseDoc returns a document's fenced blocks, and its problems: a fence
// without a language or with one not in docLangs, an indented code block
// (which could hold a command no test sees), a marker with no reason or
// with no block after it.
func parseDoc(file, data string) (blocks []docBlock, problems []string) {
	lines := strings.Split(data, "\n")
	section := ""
	listIndent := -1 // the content indentation of the list being read, if any
	prevBlank := true
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		at := fmt.Sprintf("%s:%d", file, i+1)
		if m := fenceRE.FindStringSubmatch(l); m != nil {
			indent, ticks, lang := m[1], m[2], strings.TrimSpace(m[3])
			b := docBlock{file: file, line: i + 1, lang: lang, section: section}
			if i > 0 {
				if mm := notRunRE.FindStringSubmatch(lines[i-1]); mm != nil {
					b.marked, b.notRun = true, strings.TrimSpace(mm[1])
				}
			}
			var body []string
			closed := false
			for i++; i < len(lines); i++ {
				if strings.HasPrefix(strings.TrimLeft(lines[i], " "), ticks) && strings.TrimSpace(strings.TrimLeft(lines[i], " ")) == ticks {
					closed = true
					break
				}
				body = append(body, strings.TrimPrefix(lines[i], indent))
			}
			if !closed {
				problems = append(problems, at+": a fence that is never closed")
			}
			b.text = strings.Join(body, "\n") + "\n"
			switch {
			case lang == "":
				problems = append(problems, fmt.Sprintf("%s: a block with no language; say which, one of %s", at, strings.Join(docLangs, ", ")))
			case !slices.Contains(docLangs, lang):
				problems = append(problems, fmt.Sprintf("%s: a %s block; use one of %s (sh for any shell)", at, lang, strings.Join(docLangs, ", ")))
			}
			if b.marked && b.notRun == "" {
				problems = append(problems, at+": <!-- not run: --> gives no reason; say why the block cannot run in a test")
			}
			blocks = append(blocks, b)
			prevBlank = false
			continue
		}
		if markerRE.MatchString(l) {
			if notRunRE.FindStringSubmatch(l) == nil || i+1 >= len(lines) || !fenceRE.MatchString(lines[i+1]) {
				problems = append(problems, at+": a not-run marker must be <!-- not run: REASON --> on the line just before a block's opening fence")
			}
		}
		if strings.HasPrefix(l, "## ") {
			section = strings.TrimSpace(strings.TrimPrefix(l, "## "))
		}
		if strings.TrimSpace(l) == "" {
			prevBlank = true
			continue
		}
		indent := len(l) - len(strings.TrimLeft(l, " "))
		if m := listItemRE.FindStringSubmatch(l); m != nil {
			listIndent = len(m[0])
		} else {
			if listIndent >= 0 && indent < listIndent {
				listIndent = -1
			}
			if prevBlank && indent >= max(listIndent, 0)+4 {
				problems = append(problems, at+": an indented code block; fence it, with a language, so that TestDocs sees it")
			}
		}
		prevBlank = false
	}
	return blocks, problems
}

// script is a testscript of testdata/script: its commands and its files.
type script struct {
	name     string
	commands []string
	files    map[string]string
}

func readScripts(t *testing.T) []script {
	t.Helper()
	paths, err := filepath.Glob("testdata/script/*.txtar")
	require.NoError(t, err)
	var scripts []script
	for _, p := range paths {
		ar, err := txtar.ParseFile(p)
		require.NoError(t, err)
		s := script{name: filepath.Base(p), files: map[string]string{}}
		for _, l := range strings.Split(string(ar.Comment), "\n") {
			if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
				s.commands = append(s.commands, l)
			}
		}
		for _, f := range ar.Files {
			s.files[f.Name] = string(f.Data)
		}
		scripts = append(scripts, s)
	}
	return scripts
}

// shellRunRE is a script's command that runs a file of the archive with the
// shell: [cond] exec sh [-flags] FILE.
var shellRunRE = regexp.MustCompile(`^(?:\[[^\]]*\]\s+)*exec\s+(?:sh|bash)(?:\s+-\w+)*\s+(\S+)$`)

// runsShell reports whether s runs its file name with the shell.
func (s script) runsShell(name string) bool {
	for _, c := range s.commands {
		if m := shellRunRE.FindStringSubmatch(c); m != nil {
			if arg := m[1]; arg == name || strings.HasSuffix(arg, "/"+name) {
				return true
			}
		}
	}
	return false
}

// uses reports whether one of s's commands names its file name.
func (s script) uses(name string) bool {
	return slices.ContainsFunc(s.commands, func(c string) bool {
		return slices.ContainsFunc(strings.Fields(c), func(w string) bool {
			return w == name || strings.HasSuffix(w, "/"+name)
		})
	})
}

// readmeSection is the README's section whose blocks TestReadme holds to
// readme.txtar and readme_published.txtar, in order.
const readmeSection = "Using kvgen in your module"

// TestDocs holds every shell, YAML and JSON block of the README and of
// docs/ to a test, so that a newcomer's copy and paste works:
//
//   - a shell block is a file of a script in testdata/script, byte for
//     byte, which the script runs with `exec sh FILE` (and checks what it
//     did); the README's "Using kvgen in your module" is TestReadme's;
//   - a YAML block is a manifest that internal/manifest parses, and a file
//     of a script that uses it, or a manifest committed in the repository
//     whose committed registry it generates, unchanged;
//   - a JSON block is a file of a script that uses it;
//   - or the block says, in a <!-- not run: REASON --> comment on the line
//     before it, why no test can run it.
//
// A block added without any of these fails here.
func TestDocs(t *testing.T) {
	root := kvgentest.Root(t)
	scripts := readScripts(t)
	counts := map[string]int{}
	var notRun []string
	for _, doc := range docFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, doc))
		require.NoError(t, err)
		blocks, problems := parseDoc(doc, string(data))
		for _, p := range problems {
			t.Error(p)
		}
		for _, b := range blocks {
			if b.lang != "sh" && b.lang != "yaml" && b.lang != "json" {
				if b.marked {
					t.Errorf("%s: only sh, yaml and json blocks run; drop the not-run marker", b)
				}
				continue
			}
			if b.lang == "yaml" && !b.marked {
				if _, err := manifest.Parse(b.file, []byte(b.text)); err != nil {
					t.Errorf("%s: not a manifest kvgen reads: %v", b, err)
				}
			}
			switch {
			case b.marked:
				counts["marked"]++
				notRun = append(notRun, fmt.Sprintf("%s: %s", b, b.notRun))
			case doc == "README.md" && b.section == readmeSection && b.lang != "json":
				counts["TestReadme"]++
			default:
				how := coveredBy(t, root, scripts, b)
				if how == "" {
					t.Errorf("%s runs in no test: put it in a script of testdata/script that runs it (exec sh FILE) or uses it, or say why it cannot run with <!-- not run: REASON --> on the line before it\n%s", b, b.text)
					continue
				}
				counts[how]++
			}
		}
	}
	require.Positive(t, counts["TestReadme"], "found none of the README's walkthrough blocks: is the parser reading the documents?")
	t.Logf("blocks: %v", counts)
	for _, n := range notRun {
		t.Logf("not run: %s", n)
	}
}

// coveredBy says which test runs b, or "".
func coveredBy(t *testing.T, root string, scripts []script, b docBlock) string {
	for _, s := range scripts {
		for name, data := range s.files {
			if data != b.text {
				continue
			}
			if b.lang == "sh" && s.runsShell(name) || b.lang != "sh" && s.uses(name) {
				return s.name
			}
		}
	}
	if b.lang == "yaml" {
		if file := committedManifest(t, root, b.text); file != "" {
			checkCommitted(t, root, file)
			return "committed"
		}
	}
	return ""
}

// committedManifest returns the manifest of the repository, relative to
// root, whose content is text, or "".
func committedManifest(t *testing.T, root, text string) string {
	var found string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if found == "" && strings.HasSuffix(p, ".yaml") {
			if data, err := os.ReadFile(p); err == nil && string(data) == text {
				found = must(filepath.Rel(root, p))
			}
		}
		return nil
	})
	require.NoError(t, err)
	return found
}

// checkCommitted generates the registry of a committed manifest, in
// memory, and fails unless it is the committed file: the manifest a
// document shows generates what the repository holds.
func checkCommitted(t *testing.T, root, file string) {
	t.Helper()
	dir := filepath.Join(root, filepath.Dir(file))
	res, err := pipeline.Generate(context.Background(), pipeline.Options{WorkDir: dir, Env: os.Environ(), Manifest: filepath.Base(file)})
	if !assert.NoError(t, err, "generating %s", file) {
		return
	}
	diff, err := res.Stale()
	require.NoError(t, err)
	if diff != nil {
		t.Errorf("%s does not generate its committed registry %s:\n%s", file, res.Path, diff.Diff)
	}
}

// TestParseDoc holds the block reader to what it must refuse.
func TestParseDoc(t *testing.T) {
	blocks, problems := parseDoc("x.md", strings.Join([]string{
		"## Section",
		"",
		"<!-- not run: needs the module proxy -->",
		"```sh",
		"go get example.com/x",
		"```",
		"",
		"- a list item:",
		"",
		"  <!-- not run: a benchmark -->",
		"  ```sh",
		"  go test -bench .",
		"  ```",
		"",
		"```",
		"unlabelled",
		"```",
		"",
		"```bash",
		"ls",
		"```",
		"",
		"<!-- not run: -->",
		"```sh",
		"true",
		"```",
		"",
		"<!-- not run: nothing follows -->",
		"",
		"Text:",
		"",
		"    go build ./...",
		"",
	}, "\n"))
	require.Len(t, blocks, 5)
	assert.Equal(t, docBlock{file: "x.md", line: 4, lang: "sh", text: "go get example.com/x\n", section: "Section", notRun: "needs the module proxy", marked: true}, blocks[0])
	assert.Equal(t, "go test -bench .\n", blocks[1].text)
	assert.Equal(t, "a benchmark", blocks[1].notRun)
	assert.Equal(t, []string{
		"x.md:15: a block with no language; say which, one of sh, yaml, json, go, text",
		"x.md:19: a bash block; use one of sh, yaml, json, go, text (sh for any shell)",
		"x.md:24: <!-- not run: --> gives no reason; say why the block cannot run in a test",
		"x.md:28: a not-run marker must be <!-- not run: REASON --> on the line just before a block's opening fence",
		"x.md:32: an indented code block; fence it, with a language, so that TestDocs sees it",
	}, problems)
}

// TestDocLinks follows every relative link of the README and of docs/ to
// a file or directory of the repository, and a #fragment to a heading of
// the Markdown file it names.
func TestDocLinks(t *testing.T) {
	root := kvgentest.Root(t)
	anchors := map[string][]string{}
	anchorsOf := func(file string) []string {
		if a, ok := anchors[file]; ok {
			return a
		}
		data, err := os.ReadFile(filepath.Join(root, file))
		require.NoError(t, err)
		anchors[file] = headingAnchors(string(data))
		return anchors[file]
	}
	links := 0
	for _, doc := range docFiles(t, root) {
		data, err := os.ReadFile(filepath.Join(root, doc))
		require.NoError(t, err)
		for _, l := range markdownLinks(string(data)) {
			target, frag, _ := strings.Cut(l.target, "#")
			if strings.Contains(target, ":") {
				continue // a URL
			}
			links++
			file := doc
			if target != "" {
				file = path.Join(path.Dir(doc), target)
				if strings.HasPrefix(file, "../") {
					t.Errorf("%s:%d: link %s leads out of the repository", doc, l.line, l.target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(file))); err != nil {
					t.Errorf("%s:%d: link %s: no such file or directory", doc, l.line, l.target)
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(file, ".md") {
				t.Errorf("%s:%d: link %s: a fragment of a file that is not Markdown", doc, l.line, l.target)
				continue
			}
			if !slices.Contains(anchorsOf(file), frag) {
				t.Errorf("%s:%d: link %s: %s has no heading #%s; it has %s", doc, l.line, l.target, file, frag, strings.Join(anchorsOf(file), ", "))
			}
		}
	}
	require.Positive(t, links, "found no relative links: is the link reader working?")
	t.Logf("%d relative links", links)
}

type mdLink struct {
	line   int
	target string
}

var (
	inlineLinkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	refLinkRE    = regexp.MustCompile(`^\s*\[[^\]]+\]:\s+(\S+)`)
	codeSpanRE   = regexp.MustCompile("`[^`]*`")
)

// proseLines yields a document's lines outside fenced code blocks, with
// their index from 0.
func proseLines(data string) iter.Seq2[int, string] {
	return func(yield func(int, string) bool) {
		inFence := ""
		for i, l := range strings.Split(data, "\n") {
			if m := fenceRE.FindStringSubmatch(l); m != nil {
				switch {
				case inFence == "":
					inFence = m[2]
				case strings.TrimSpace(l) == inFence:
					inFence = ""
				}
				continue
			}
			if inFence == "" && !yield(i, l) {
				return
			}
		}
	}
}

// markdownLinks returns the targets of a document's links, outside code
// blocks and code spans.
func markdownLinks(data string) []mdLink {
	var links []mdLink
	for i, l := range proseLines(data) {
		l = codeSpanRE.ReplaceAllString(l, "")
		for _, m := range inlineLinkRE.FindAllStringSubmatch(l, -1) {
			links = append(links, mdLink{i + 1, m[1]})
		}
		if m := refLinkRE.FindStringSubmatch(l); m != nil {
			links = append(links, mdLink{i + 1, m[1]})
		}
	}
	return links
}

// headingAnchors returns the fragments GitHub gives a document's headings:
// the text in lower case, without punctuation, spaces made hyphens, and
// -1, -2... after a fragment already taken.
func headingAnchors(data string) []string {
	var anchors []string
	seen := map[string]int{}
	for _, l := range proseLines(data) {
		text, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " ")
		if !ok || !strings.HasPrefix(l, "#") || len(l)-len(strings.TrimLeft(l, "#")) > 6 {
			continue
		}
		text = inlineLinkRE.ReplaceAllString(text, "]")
		var b strings.Builder
		for _, r := range strings.ToLower(strings.TrimSpace(text)) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a] = n + 1
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors = append(anchors, a)
	}
	return anchors
}

func TestHeadingAnchors(t *testing.T) {
	assert.Equal(t, []string{
		"gomod-and-gosum",
		"what-an-operator-sees-stats-kv-events-load-failures",
		"kvserver-serve",
		"1-manifest",
		"the-test-command",
		"the-test-command-1",
		"kvgen-and-vllms---kv-transfer-config",
	}, headingAnchors("## go.mod and go.sum\n### What an operator sees: stats, KV events, load failures\n## `kvserver serve`\n## 1. Manifest\n```sh\n# not a heading\n```\n### The test command\n### The test command\n# kvgen and vLLM's `--kv-transfer-config`\n"))
}

// copyRepo is the scripts' command `repo DIR`: it copies this checkout's
// files into DIR, as a clone would have them (with the working tree's
// changes, without what .gitignore leaves out), so that a script can run
// a document's commands in the repository they describe without writing
// to it.
func copyRepo(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: repo DIR")
	}
	root := ts.Getenv("ROOT")
	files, err := repoFiles(root)
	ts.Check(err)
	dst := ts.MkAbs(args[0])
	for _, f := range files {
		from := filepath.Join(root, filepath.FromSlash(f))
		fi, err := os.Lstat(from)
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted in the working tree, or not a file
		}
		data, err := os.ReadFile(from)
		ts.Check(err)
		to := filepath.Join(dst, filepath.FromSlash(f))
		ts.Check(os.MkdirAll(filepath.Dir(to), 0o755))
		ts.Check(os.WriteFile(to, data, fi.Mode().Perm()))
	}
}

// repoFiles lists the files of the checkout at root, relative to it: those
// git tracks or would track; without git, every file outside dot
// directories.
func repoFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard")
	cmd.Dir = root
	if out, err := cmd.Output(); err == nil {
		return strings.Split(strings.TrimRight(string(out), "\x00"), "\x00"), nil
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if strings.HasPrefix(d.Name(), ".") && p != root {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.IsDir() {
			files = append(files, filepath.ToSlash(must(filepath.Rel(root, p))))
		}
		return nil
	})
	return files, err
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
