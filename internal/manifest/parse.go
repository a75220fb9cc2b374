package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"go/token"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/names"
	"github.com/kvgen/kvgen/internal/problemcap"
	"github.com/kvgen/kvgen/internal/suggest"
)

// validName reports whether s is a valid connector name or alias.
func validName(s string) bool { return names.Valid(s) }

func mustField(t reflect.Type, key string) field {
	f, ok := fieldByKey(t, key)
	if !ok {
		panic("manifest: " + t.Name() + " has no key " + key)
	}
	return f
}

// parser turns the YAML of one manifest into a Manifest, collecting every
// problem on the way.
type parser struct {
	file string
	data []byte
	// lineStarts holds the offset of each line as YAML counts lines, which
	// also breaks at a lone \r and at U+0085, U+2028 and U+2029.
	lineStarts []int
	// newlines holds the offset of every \n, which is where Go's lines end.
	newlines []int
	errs     diag.List
	// entryErrs counts the errors in errs that lie within a connector
	// entry, which is then marked Invalid; badEntries are their indices.
	entryErrs  int
	badEntries []int
}

func newParser(file string, data []byte) *parser {
	p := &parser{file: file, data: data, lineStarts: []int{0}}
	if bytes.HasPrefix(data, []byte("\uFEFF")) {
		p.lineStarts[0] = 3
	}
	for i, b := range data {
		if b == '\n' {
			p.newlines = append(p.newlines, i)
		}
	}
	for i := p.lineStarts[0]; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == '\r' && i+1 < len(data) && data[i+1] == '\n':
			size = 2
		case r == '\r', r == '\n', r == '\u0085', r == '\u2028', r == '\u2029':
		default:
			i += size
			continue
		}
		i += size
		p.lineStarts = append(p.lineStarts, i)
	}
	return p
}

// at converts a YAML line and column (1-based, counted in characters) to a
// Go position (lines end at \n, columns count bytes), clamped to the input.
func (p *parser) at(line, col int) token.Position {
	line = min(max(line, 1), len(p.lineStarts))
	off := p.lineStarts[line-1]
	for ; col > 1 && off < len(p.data); col-- {
		r, size := utf8.DecodeRune(p.data[off:])
		if r == '\r' || r == '\n' {
			break
		}
		off += size
	}
	return p.offset(off)
}

// offset returns the Go position of byte offset off.
func (p *parser) offset(off int) token.Position {
	n, _ := slices.BinarySearch(p.newlines, off) // the \n before off
	// An editor shows no byte order mark: the first line's columns count
	// from after it.
	lineStart := min(p.lineStarts[0], off)
	if n > 0 {
		lineStart = p.newlines[n-1] + 1
	}
	return token.Position{Filename: p.file, Offset: off, Line: 1 + n, Column: 1 + off - lineStart}
}

func (p *parser) pos(n *yaml.Node) token.Position { return p.at(n.Line, n.Column) }

func (p *parser) parse() *Manifest {
	if bytes.HasPrefix(p.data, []byte{0xFE, 0xFF}) || bytes.HasPrefix(p.data, []byte{0xFF, 0xFE}) {
		p.errs.Add(p.offset(0), "the manifest is encoded in UTF-16; save it as UTF-8")
		return nil
	}
	// One byte order mark may start the file. Another one, invisible, has
	// the YAML reader lose the first character of every line after it,
	// which can uncomment what a reviewer sees commented out.
	bom := []byte("\uFEFF")
	start := 0
	if bytes.HasPrefix(p.data, bom) {
		start = len(bom)
	}
	if i := bytes.Index(p.data[start:], bom); i >= 0 {
		p.errs.Add(p.offset(start+i), "an invisible byte order mark (U+FEFF), which YAML readers read differently; remove it")
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(p.data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			p.errs.Add(p.at(1, 1), "the manifest is empty; start it with \"version: %d\" and a connectors list", formatVersion)
		} else {
			p.syntaxError(err)
		}
		return nil
	}
	var next yaml.Node
	// Reported last, as it lies after the first document: problems are
	// then found in the order of their positions (see crowded).
	defer func(err error) {
		switch {
		case errors.Is(err, io.EOF):
		case err != nil:
			p.syntaxError(err)
		default:
			p.errs.Add(p.pos(&next), "a second YAML document; a manifest is a single document, so remove this \"---\" and what follows or move it to its own file")
		}
	}(dec.Decode(&next))

	root := doc.Content[0]
	if isNull(root) {
		p.errs.Add(p.pos(root), "the manifest is empty; start it with \"version: %d\" and a connectors list", formatVersion)
		return nil
	}
	if root.Kind != yaml.MappingNode {
		p.errs.Add(p.pos(root), "the manifest must be a mapping with keys such as version and connectors, got %s", describe(root))
		return nil
	}
	var f fileV1
	p.decodeMapping(root, reflect.ValueOf(&f).Elem(), &p.errs)
	m := &Manifest{
		File:    p.file,
		Version: f.Version,
		Factory: f.Factory,
		Package: f.Package,
		Output:  f.Output,
		Extends: f.Extends,
		SHA256:  sum(p.data),
		drop:    f.Drop,
		pin:     f.Pin,
		Entries: slices.Concat(f.Connectors, f.Plugins),
	}
	for _, i := range p.badEntries {
		m.Entries[i].Invalid = true
	}
	p.validate(m)
	return m
}

// yamlLine matches the line that yaml.v3 puts in its syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: (?:line (\d+): )?`)

// syntaxError reports a YAML syntax error at its line. yaml.v3 gives no
// column, so the error points at the line's first character, or at the tab
// that broke the indentation.
func (p *parser) syntaxError(err error) {
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		msg = msg[len(m[0]):]
		if m[1] != "" {
			line, _ = strconv.Atoi(m[1])
		}
	}
	if line == 0 {
		// Without a line the problem is either on the first line or a
		// character YAML does not allow; find that character if there is one.
		if off, ok := firstDisallowed(p.data); ok {
			p.errs.Add(p.offset(off), "invalid YAML: %s", msg)
			return
		}
		line = 1
	}
	if strings.Contains(msg, "tab") || strings.Contains(msg, "cannot start any token") {
		// yaml.v3 sometimes names the line before the one with the tab.
		for _, l := range []int{line, line + 1} {
			if off, ok := p.indentTab(l); ok {
				p.errs.Add(p.offset(off), "invalid YAML: a tab in the indentation; indent with spaces")
				return
			}
		}
	}
	start, text := p.lineText(line)
	indent := len(text) - len(bytes.TrimLeft(text, " \t"))
	if indent == len(text) {
		indent = 0
	}
	if strings.Contains(msg, "unexpected end of stream") {
		// A quote that opens a value and never closes: yaml.v3 names
		// where the scan began, not the quote.
		if off, ok := p.unclosedQuote(line); ok {
			p.errs.Add(p.offset(off), "invalid YAML: %s; this quoted value is not closed", msg)
			return
		}
	}
	for words, hint := range yamlHints {
		if strings.Contains(msg, words) {
			msg += "; " + hint
			break
		}
	}
	p.errs.Add(p.offset(start+indent), "invalid YAML: %s", msg)
}

// yamlHints say, after yaml.v3's words for a syntax error, what usually
// causes it in a manifest.
var yamlHints = map[string]string{
	"mapping values are not allowed in this context": `a key is indented more than the keys beside it, or a value that holds ": " needs quotes`,
	"did not find expected key":                      "a line is indented unlike the keys beside it",
}

// unclosedQuote finds, from line on, a quote that opens a value and is
// not closed on its line: where an unclosed quoted value begins.
func (p *parser) unclosedQuote(line int) (int, bool) {
	for l := line; l <= len(p.lineStarts); l++ {
		start, text := p.lineText(l)
		for i := 0; i < len(text); i++ {
			q := text[i]
			if q == '#' && (i == 0 || text[i-1] == ' ') {
				break // a comment
			}
			if q != '"' && q != '\'' || i > 0 && text[i-1] != ' ' && text[i-1] != '[' && text[i-1] != ',' {
				continue
			}
			end := bytes.IndexByte(text[i+1:], q)
			for q == '"' && end > 0 && text[i+end] == '\\' {
				next := bytes.IndexByte(text[i+end+2:], q)
				if next < 0 {
					end = -1
					break
				}
				end += next + 1
			}
			if end < 0 {
				return start + i, true
			}
			i += end + 1
		}
	}
	return 0, false
}

// lineText returns the offset and text of a YAML line, without its line break.
func (p *parser) lineText(n int) (int, []byte) {
	start := p.at(n, 1).Offset
	text := p.data[start:]
	if n < len(p.lineStarts) {
		text = p.data[start:p.lineStarts[n]]
	}
	return start, bytes.TrimRight(text, "\r\n\u0085\u2028\u2029")
}

// indentTab returns the offset of a tab in the indentation of a line.
func (p *parser) indentTab(line int) (int, bool) {
	if line > len(p.lineStarts) {
		return 0, false
	}
	start, text := p.lineText(line)
	indent := len(text) - len(bytes.TrimLeft(text, " \t"))
	if tab := bytes.IndexByte(text[:indent], '\t'); tab >= 0 {
		return start + tab, true
	}
	return 0, false
}

// firstDisallowed returns the offset of the first character that YAML does
// not allow in a stream: invalid UTF-8 or a control character.
func firstDisallowed(data []byte) (int, bool) {
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		ok := r == '\t' || r == '\n' || r == '\r' || r >= 0x20 && r <= 0x7E || r == 0x85 ||
			r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
		if r == utf8.RuneError && size == 1 || !ok {
			return i, true
		}
		i += size
	}
	return 0, false
}

// decodeMapping sets the tagged fields of struct v from mapping node n.
func (p *parser) decodeMapping(n *yaml.Node, v reflect.Value, errs *diag.List) {
	fs := fields(v.Type())
	seen := make(map[string]*yaml.Node)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if i == 0 {
			if pf := v.FieldByName("Pos"); pf.IsValid() && pf.Type() == reflect.TypeFor[token.Position]() {
				pf.Set(reflect.ValueOf(p.pos(k)))
			}
		}
		switch {
		case k.Kind == yaml.AliasNode:
			errs.Add(p.pos(k), "YAML aliases (%s) are not supported in a manifest; write the key out", suggest.Quote("*"+k.Value))
			continue
		case k.Tag == "!!merge":
			errs.Add(p.pos(k), "YAML merge keys (<<) are not supported in a manifest; write the keys out")
			continue
		case k.Kind != yaml.ScalarNode:
			errs.Add(p.pos(k), "a key must be a plain name, got %s", describe(k))
			continue
		}
		f, ok := fieldByKey(v.Type(), k.Value)
		if !ok {
			known := keys(v.Type())
			var near []string
			if !p.crowded(errs) {
				near = suggest.Nearest(k.Value, known, 1)
			}
			if len(near) > 0 {
				errs.Add(p.pos(k), "unknown key %s; did you mean %q?", suggest.Quote(k.Value), near[0])
			} else {
				errs.Add(p.pos(k), "unknown key %s; the keys are %s", suggest.Quote(k.Value), strings.Join(known, ", "))
			}
			continue
		}
		if first, dup := seen[k.Value]; dup {
			errs.Add(p.pos(k), "key %q is given twice (first at %s); remove one", k.Value, diag.At(p.pos(first), "first given here"))
			continue
		}
		seen[k.Value] = k
		p.decodeValue(val, v.Field(f.index), f, errs)
	}
	// An entry's extent, for problems found later to be placed in it.
	if ef := v.FieldByName("End"); ef.IsValid() && len(n.Content) > 0 {
		last := n
		for len(last.Content) > 0 {
			last = last.Content[len(last.Content)-1]
		}
		ef.Set(reflect.ValueOf(p.pos(last)))
	}
	for _, f := range fs {
		if other := seen[f.key]; other != nil && f.spells != "" {
			if first := seen[f.spells]; first != nil {
				errs.Add(p.pos(laterKey(first, other)), "%s: and %s: are one list spelt two ways; give one", f.spells, f.key)
			}
			seen[f.spells] = other
		}
	}
	for _, f := range fs {
		if seen[f.key] != nil || f.spells != "" {
			continue
		}
		switch {
		case f.required && (f.unless == "" || seen[f.unless] == nil):
			errs.Add(p.pos(n), "missing key %q%s; add it, e.g. %q", f.key, spellings(fs, f.key), f.key+": "+f.example)
		case f.def != "":
			v.Field(f.index).Addr().Interface().(scalar).setDefault(f.def)
		}
	}
}

// crowded reports whether problemcap.Max problems precede the node being
// decoded, errs being where its problems go: one found now is never shown,
// so it is not worth a suggestion. Decoding finds problems in the order of
// their positions, and validation's come after, so the count of those
// found so far is the count of those before.
func (p *parser) crowded(errs *diag.List) bool {
	n := len(p.errs)
	if errs != &p.errs {
		n += len(*errs)
	}
	return n >= problemcap.Max
}

// scalar is a Value that decodes itself from a YAML scalar.
type scalar interface {
	// decode sets the value from n. When n has the wrong type it returns
	// what it wants instead; otherwise a non-empty result is a complete
	// message saying what is wrong.
	decode(n *yaml.Node, pos token.Position) (want, msg string)
	setDefault(s string)
	schema() *schema
}

func (v *Value[T]) decode(n *yaml.Node, pos token.Position) (want, msg string) {
	str := n.Kind == yaml.ScalarNode && n.Tag == "!!str"
	switch dst := any(&v.V).(type) {
	case *string:
		if !str {
			return "a string", ""
		}
		*dst = n.Value
	case *int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" || n.Decode(dst) != nil {
			return "an integer", ""
		}
	default:
		panic(fmt.Sprintf("manifest: no decoding for %T", v.V))
	}
	v.Pos, v.Set = pos, true
	return "", ""
}

func (v *Value[T]) setDefault(s string) {
	switch dst := any(&v.V).(type) {
	case *string:
		*dst = s
	default:
		panic(fmt.Sprintf("manifest: no default for %T", v.V))
	}
}

// decodeValue sets dst, the field f, from n.
func (p *parser) decodeValue(n *yaml.Node, dst reflect.Value, f field, errs *diag.List) {
	if n.Kind == yaml.AliasNode {
		errs.Add(p.pos(n), "YAML aliases (%s) are not supported in a manifest; write the value out", suggest.Quote("*"+n.Value))
		return
	}
	pos := p.pos(n)
	if s, ok := dst.Addr().Interface().(scalar); ok {
		if isNull(n) || n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value == "" {
			p.empty(errs, pos, f)
			return
		}
		// A string is refused past its maxLength before anything is made
		// of it: an import path of a megabyte would reach the go command,
		// and every error that names it.
		if f.maxLen > 0 && !f.name && dst.Type() == reflect.TypeFor[Value[string]]() && n.Kind == yaml.ScalarNode && len(n.Value) > f.maxLen {
			errs.Add(pos, "%s has %d bytes: want at most %d", f.key, len(n.Value), f.maxLen)
			return
		}
		want, msg := s.decode(n, pos)
		switch {
		case want != "":
			p.wrongType(errs, n, f, want)
		case msg != "":
			errs.Add(pos, "%s", msg)
		}
		return
	}
	switch dst.Kind() {
	case reflect.Slice:
		p.decodeList(n, dst, f, errs)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			errs.Add(pos, "want a mapping with keys such as %s, got %s", strings.Join(requiredKeys(dst.Type()), " and "), describe(n))
			return
		}
		p.decodeMapping(n, dst, errs)
	default:
		panic("manifest: no decoding for " + dst.Type().String())
	}
}

func (p *parser) decodeList(n *yaml.Node, dst reflect.Value, f field, errs *diag.List) {
	pos := p.pos(n)
	switch {
	case isNull(n):
		p.empty(errs, pos, f)
		return
	case n.Kind != yaml.SequenceNode:
		p.wrongType(errs, n, f, "a list")
		return
	case len(n.Content) < f.minItems:
		errs.Add(pos, "%s is an empty list; list at least %d, e.g. %q, or leave the key out", f.key, f.minItems, f.key+": "+f.example)
		return
	case f.maxItems > 0 && len(n.Content) > f.maxItems:
		// Refused before its items are decoded: they are not worth it.
		errs.Add(pos, "%s lists %d items; kvgen takes at most %d", f.key, len(n.Content), f.maxItems)
		return
	}
	elem := dst.Type().Elem()
	_, isScalar := reflect.New(elem).Interface().(scalar)
	list := reflect.MakeSlice(dst.Type(), 0, len(n.Content))
	first := make(map[string]token.Position)
	for i, item := range n.Content {
		ev := reflect.New(elem).Elem()
		if !isScalar {
			var itemErrs diag.List
			p.decodeValue(item, ev, f, &itemErrs)
			label := ev.Interface().(labeler).label(i)
			for _, e := range itemErrs {
				*errs = append(*errs, e.Prefix(label))
			}
			// A connector with a problem is left out and the others are
			// checked; a problem elsewhere fails the manifest.
			if len(itemErrs) > 0 && elem == reflect.TypeFor[Entry]() {
				p.entryErrs += len(itemErrs)
				p.badEntries = append(p.badEntries, i)
			}
			list = reflect.Append(list, ev)
			continue
		}
		if isNull(item) || item.Kind == yaml.ScalarNode && item.Tag == "!!str" && item.Value == "" {
			errs.Add(p.pos(item), "%s: an item is empty; remove it or give a value", f.key)
			continue
		}
		var itemErrs diag.List
		p.decodeValue(item, ev, f, &itemErrs)
		*errs = append(*errs, itemErrs...)
		if len(itemErrs) > 0 {
			continue
		}
		if f.unique {
			key := fmt.Sprint(ev.FieldByName("V").Interface())
			ipos := p.pos(item)
			if at, dup := first[key]; dup {
				errs.Add(ipos, "%s: %s is listed twice (first at %s); remove one", f.key, suggest.Quote(key), diag.At(at, "first listed here"))
				continue
			}
			first[key] = ipos
		}
		list = reflect.Append(list, ev)
	}
	dst.Set(list)
}

// spellings names the other spellings of key among fs, as a message
// shows them after it: ` (or "plugins")`.
func spellings(fs []field, key string) string {
	var out string
	for _, f := range fs {
		if f.spells == key {
			out += fmt.Sprintf(" (or %q)", f.key)
		}
	}
	return out
}

// laterKey is whichever of two keys of a mapping comes second.
func laterKey(a, b *yaml.Node) *yaml.Node {
	if a.Line > b.Line || a.Line == b.Line && a.Column > b.Column {
		return a
	}
	return b
}

func (p *parser) empty(errs *diag.List, pos token.Position, f field) {
	if f.required {
		errs.Add(pos, "%s is empty; give a value, e.g. %q", f.key, f.key+": "+f.example)
		return
	}
	errs.Add(pos, "%s is empty; give a value, e.g. %q, or leave the key out", f.key, f.key+": "+f.example)
}

func (p *parser) wrongType(errs *diag.List, n *yaml.Node, f field, want string) {
	errs.Add(p.pos(n), "%s: want %s, got %s; e.g. %q", f.key, want, describe(n), f.key+": "+f.example)
}

func requiredKeys(t reflect.Type) []string {
	var out []string
	for _, f := range fields(t) {
		if f.required {
			out = append(out, f.key)
		}
	}
	return out
}

func isNull(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode && n.Tag == "!!null" }

// describe names the kind of a node for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	switch n.Tag {
	case "!!str":
		return "a string"
	case "!!int":
		return "an integer"
	case "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "nothing"
	case "!!timestamp":
		return "a timestamp"
	case "!!binary":
		return "binary data"
	}
	return "a value tagged " + suggest.Quote(n.Tag)
}
