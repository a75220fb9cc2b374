package manifest

import (
	"cmp"
	"fmt"
	"go/build"
	"go/token"
	"io"
	"path"
	"reflect"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/names"
	"github.com/kvgen/kvgen/internal/suggest"
)

// validate checks the values that decoded with the right types; a value
// that did not decode has been reported already and is not Set.
func (p *parser) validate(m *Manifest) {
	if v := m.Version; v.Set && v.V != formatVersion {
		p.errs.Add(v.Pos, "unsupported manifest version %d; this kvgen reads version %d", v.V, formatVersion)
	}
	if v := m.Factory; v.Set {
		if msg := checkFactory(v.V); msg != "" {
			p.errs.Add(v.Pos, "%s", msg)
		}
	}
	if v := m.Package; v.Set {
		switch {
		case v.V == "_":
			p.errs.Add(v.Pos, "package %q is the blank identifier; give a package name such as \"connectors\"", v.V)
		case token.IsKeyword(v.V):
			p.errs.Add(v.Pos, "package %q is a Go keyword; give a package name such as \"connectors\"", v.V)
		case !token.IsIdentifier(v.V):
			p.errs.Add(v.Pos, "package %s is not a Go identifier; give a package name such as \"connectors\"", suggest.Quote(v.V))
		}
	}
	if v := m.Output; v.Set {
		if msg := checkOutput(v.V); msg != "" {
			p.errs.Add(v.Pos, "%s", msg)
		}
	}
	if v := m.Extends; v.Set {
		if msg := checkRelative("extends", v.V, "the manifest it extends", mustField(reflect.TypeFor[fileV1](), "extends").example); msg != "" {
			p.errs.Add(v.Pos, "%s", msg)
		}
	}
	for _, pin := range m.pin {
		if v := pin.Replace; v.Set {
			if msg := checkRelative("replace", v.V, "the module's directory", mustField(reflect.TypeFor[pinV1](), "replace").example); msg != "" {
				p.errs.Add(v.Pos, "%s: %s", pin.label(0), msg)
			}
		}
		if v := pin.Version; v.Set && (!semver.IsValid(v.V) || semver.Canonical(v.V) != v.V && semver.Canonical(v.V)+"+incompatible" != v.V) {
			p.errs.Add(v.Pos, "%s: version %s is not a canonical semantic version; want a version such as v1.4.0", pin.label(0), suggest.Quote(v.V))
		}
	}
	for i, c := range m.Entries {
		n := len(p.errs)
		p.validateNames(c, c.Label(i))
		names := len(p.errs) - n
		p.validateEntry(c, c.Label(i))
		p.markInvalid(m.Entries, i, len(p.errs)-n)
		m.Entries[i].OnlyNames = !c.Invalid && names > 0 && len(p.errs)-n == names
	}
	p.checkUnique(m.Entries)
}

// validateNames checks an entry's name and aliases: problems that leave
// its package and constructor fit to check.
func (p *parser) validateNames(c Entry, label string) {
	add := p.adder(label)
	if v := c.Name; v.Set {
		if msg := checkName("name", v.V); msg != "" {
			add(v.Pos, "%s", msg)
		}
	}
	for _, a := range c.Aliases {
		if msg := checkName("alias", a.V); msg != "" {
			add(a.Pos, "%s", msg)
		} else if c.Name.Set && a.V == c.Name.V {
			add(a.Pos, "alias %q is the connector's own name; remove it", a.V)
		}
	}
}

// adder returns a function that adds a problem of the entry label.
func (p *parser) adder(label string) func(pos token.Position, format string, args ...any) {
	return func(pos token.Position, format string, args ...any) {
		p.errs.Add(pos, "%s: %s", label, fmt.Sprintf(format, args...))
	}
}

func (p *parser) validateEntry(c Entry, label string) {
	add := p.adder(label)
	if v := c.Import; v.Set {
		if err := module.CheckImportPath(v.V); err != nil {
			reason := err
			if ip, ok := err.(*module.InvalidPathError); ok {
				reason = ip.Err
			}
			add(v.Pos, "import %s is not a valid Go import path: %v; give the package's full import path, e.g. %q",
				suggest.Quote(v.V), reason, mustField(reflect.TypeFor[Entry](), "import").example)
		}
	}
	if v := c.Constructor; v.Set {
		switch {
		case !token.IsIdentifier(v.V):
			add(v.Pos, "constructor %s is not a Go identifier; give the function's name only, e.g. \"New\"", suggest.Quote(v.V))
		case !token.IsExported(v.V):
			add(v.Pos, "constructor %s is lowercase: unexported functions cannot be called from the generated package; export it", suggest.Quote(v.V))
		}
	}
	if v := c.Version; v.Set {
		switch {
		case !semver.IsValid(v.V):
			add(v.Pos, "version %s is not a semantic version; want a version such as v1.4.0", suggest.Quote(v.V))
		case semver.Canonical(v.V) != v.V && semver.Canonical(v.V)+"+incompatible" != v.V:
			add(v.Pos, "version %s is not in canonical form; want a version such as v1.4.0, here %s", suggest.Quote(v.V), suggest.Quote(semver.Canonical(v.V)))
		}
	}
	if v := c.Replace; v.Set {
		if msg := checkRelative("replace", v.V, "the module's directory", mustField(reflect.TypeFor[Entry](), "replace").example); msg != "" {
			add(v.Pos, "%s", msg)
		}
	}
}

// checkRelative says what is wrong with a path that must be relative to
// the manifest, with forward slashes and clean, or returns "". what is
// what the path names, for the advice.
func checkRelative(key, p, what, example string) string {
	switch {
	case isAbs(p):
		return fmt.Sprintf("%s %s is an absolute path, which ties the manifest to one machine; give %s relative to the manifest, e.g. %q", key, suggest.Quote(p), what, example)
	case strings.Contains(p, `\`):
		return fmt.Sprintf("%s %s contains a backslash; separate directories with \"/\"", key, suggest.Quote(p))
	case path.Clean(p) != p:
		return fmt.Sprintf("%s %s is not a clean path; write %s", key, suggest.Quote(p), suggest.Quote(path.Clean(p)))
	}
	return ""
}

// checkFactory says what is wrong with a factory: value, or returns "".
func checkFactory(s string) string {
	example := mustField(reflect.TypeFor[fileV1](), "factory").example
	path, name, ok := splitFactory(s)
	if !ok {
		return fmt.Sprintf("factory %s is not IMPORT/PATH.TypeName; name the contract's type with its package's import path, e.g. %q", suggest.Quote(s), example)
	}
	if err := module.CheckImportPath(path); err != nil {
		reason := err
		if ip, ok := err.(*module.InvalidPathError); ok {
			reason = ip.Err
		}
		return fmt.Sprintf("factory %s: %s is not a valid Go import path: %v; e.g. %q", suggest.Quote(s), suggest.Quote(path), reason, example)
	}
	if !token.IsIdentifier(name) || !token.IsExported(name) {
		return fmt.Sprintf("factory %s: %s is not an exported Go identifier; name an exported type, e.g. %q", suggest.Quote(s), suggest.Quote(name), example)
	}
	return ""
}

// checkName says what is wrong with a connector name or alias, or returns "".
func checkName(kind, s string) string {
	if len(s) > names.MaxLen {
		return fmt.Sprintf("%s %s is longer than %d bytes; give a shorter name", kind, suggest.Quote(s), names.MaxLen)
	}
	if names.Valid(s) {
		return ""
	}
	const rule = "a name is an ASCII letter followed by ASCII letters, digits, '_', '.' or '-'"
	// Valid names are closed under prefixes, so the first prefix that
	// does not match ends at the offending character.
	for i, r := range s {
		if !names.Valid(s[:i+utf8.RuneLen(r)]) {
			if i == 0 {
				return fmt.Sprintf("%s %s cannot start with %q; %s", kind, suggest.Quote(s), r, rule)
			}
			return fmt.Sprintf("%s %s cannot contain %q; %s", kind, suggest.Quote(s), r, rule)
		}
	}
	return fmt.Sprintf("%s %s is not a valid name; %s", kind, suggest.Quote(s), rule)
}

func isAbs(p string) bool {
	return strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) ||
		len(p) >= 2 && p[1] == ':' && ('a' <= p[0] && p[0] <= 'z' || 'A' <= p[0] && p[0] <= 'Z')
}

// checkOutput says what is wrong with the output file name, or returns "".
func checkOutput(s string) string {
	example := mustField(reflect.TypeFor[fileV1](), "output").def
	q := suggest.Quote(s)
	switch {
	case isAbs(s):
		return fmt.Sprintf("output %s is an absolute path; give a file name relative to the manifest, e.g. %q", q, example)
	case strings.Contains(s, `\`):
		return fmt.Sprintf("output %s contains a backslash; separate directories with \"/\"", q)
	case path.Clean(s) == ".." || strings.HasPrefix(path.Clean(s), "../"):
		return fmt.Sprintf("output %s is outside the manifest's directory; write the file there or below it", q)
	}
	if msg := plainPath("output", q, s); msg != "" {
		return msg
	}
	return CheckFileName("output", s)
}

// CheckFileName says what is wrong with the name of the generated file at
// slash-separated path p, or returns "": it must be a plain Go file name
// that go build compiles. what is how the user gave p ("output", "-o");
// messages start with it.
func CheckFileName(what, p string) string {
	example := mustField(reflect.TypeFor[fileV1](), "output").def
	q := suggest.Quote(p)
	base := path.Base(p)
	if msg := plainPath(what, q, base); msg != "" {
		return msg
	}
	switch {
	case !strings.HasSuffix(p, ".go"):
		return fmt.Sprintf("%s %s is not a Go file; give a name ending in .go, e.g. %q", what, q, example)
	case strings.HasSuffix(p, "_test.go"):
		return fmt.Sprintf("%s %s is a test file, which go build leaves out; give another name, e.g. %q", what, q, example)
	case strings.HasPrefix(base, ".") || strings.HasPrefix(base, "_"):
		return fmt.Sprintf("%s %s starts with %q, so go build ignores it; give another name, e.g. %q", what, q, base[:1], example)
	}
	if suffix := systemSuffix(base); suffix != "" {
		return fmt.Sprintf("%s %s ends in %s, a GOOS or GOARCH name, so go build compiles it only for that system and the package lacks Registry everywhere else; give another name, e.g. %q",
			what, q, suggest.Quote(suffix), example)
	}
	return ""
}

// nowhere is a build context for no real system: a file name that it does
// not match names a GOOS or GOARCH, as go build reads file names. Asking
// go/build keeps the lists of systems the standard library's.
var nowhere = build.Context{
	GOOS:     "kvgennone",
	GOARCH:   "kvgennone",
	Compiler: "gc",
	// Only the name is in question: every file reads as a plain one.
	OpenFile: func(string) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader("package p\n")), nil
	},
}

// systemSuffix returns the part of the Go file name base, such as
// "_windows" or "_linux_amd64", that restricts it to one GOOS or GOARCH,
// or "" when go build compiles it everywhere.
func systemSuffix(base string) string {
	if ok, err := nowhere.MatchFile(".", base); err != nil || ok {
		return ""
	}
	stem := strings.TrimSuffix(base, ".go")
	// A file name restricts at most its last two parts: _GOOS_GOARCH.
	for range 2 {
		i := strings.LastIndex(stem, "_")
		if i < 0 {
			break
		}
		stem = stem[:i]
		if ok, _ := nowhere.MatchFile(".", stem+".go"); ok {
			return strings.TrimSuffix(base[len(stem):], ".go")
		}
	}
	return strings.TrimSuffix(base[len(stem):], ".go")
}

// plainPath says what is wrong with a slash-separated relative file path
// whose names are not plain: control characters, bidirectional-text
// controls, quotes, '*' and the other characters that a module's file
// names may not hold (golang.org/x/mod's rule), or returns "". Messages
// show the path as q.
func plainPath(what, q, p string) string {
	err := module.CheckFilePath(path.Clean(p))
	if err == nil {
		return ""
	}
	example := mustField(reflect.TypeFor[fileV1](), "output").def
	for _, r := range p {
		if r == '/' || module.CheckFilePath("x"+string(r)+"x") == nil {
			continue
		}
		var char string
		switch {
		case unicode.Is(unicode.Bidi_Control, r):
			char = fmt.Sprintf("%U, a bidirectional-text control, which makes a name read differently from what it is", r)
		case unicode.IsControl(r):
			char = fmt.Sprintf("a control character (%U)", r)
		default:
			char = fmt.Sprintf("%q", r)
		}
		return fmt.Sprintf("%s %s contains %s; give a plain file name, e.g. %q", what, q, char, example)
	}
	reason := err
	if ip, ok := err.(*module.InvalidPathError); ok {
		reason = ip.Err
	}
	return fmt.Sprintf("%s %s is not a plain file path: %v; give a name such as %q", what, q, reason, example)
}

// claim is one registry key a connector takes: its name or an alias.
type claim struct {
	key   string
	alias bool
	pos   token.Position
	conn  int
}

// checkUnique reports every name or alias that an earlier entry already
// took, at the later one, naming the earlier one's position.
func (p *parser) checkUnique(cs []Entry) {
	var claims []claim
	for i, c := range cs {
		if c.Name.Set && validName(c.Name.V) {
			claims = append(claims, claim{c.Name.V, false, c.Name.Pos, i})
		}
		for _, a := range c.Aliases {
			if validName(a.V) {
				claims = append(claims, claim{a.V, true, a.Pos, i})
			}
		}
	}
	slices.SortStableFunc(claims, func(a, b claim) int { return cmp.Compare(a.pos.Offset, b.pos.Offset) })
	owner := make(map[string]claim)
	for _, c := range claims {
		first, taken := owner[c.key]
		if !taken {
			owner[c.key] = c
			continue
		}
		if first.conn == c.conn {
			continue // an alias repeating the entry's own name or alias is reported on its own
		}
		kind, what := "name", "the name"
		if c.alias {
			kind = "alias"
		}
		if first.alias {
			what = "an alias"
		}
		p.errs.Add(c.pos, "%s: %s %q is already %s of %s at %s; rename one of them",
			cs[c.conn].Label(c.conn), kind, c.key, what, cs[first.conn].Label(first.conn), diag.At(first.pos, "first taken here"))
		if !cs[c.conn].Invalid {
			cs[c.conn].OnlyNames = true
		}
		p.markInvalid(cs, c.conn, 1)
	}
}

// markInvalid records that n of the errors found lie within entry i.
func (p *parser) markInvalid(cs []Entry, i, n int) {
	if n > 0 {
		p.entryErrs += n
		cs[i].Invalid = true
	}
}
