package gen

import (
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/suggest"
)

// markers is what the marker lines of a contract type's doc comment
// declare.
type markers struct {
	roles    []Role
	registry string
	sel      *Select
}

// markerPrefix begins every marker line.
const markerPrefix = "//kvgen:"

// filesHolding returns, parsed, the files of a package whose source holds
// one of words, and the first failure among them (load.SourceFiles.Holding).
type filesHolding func(words ...string) ([]*ast.File, error)

// readMarkers reads the markers of the doc comment of the type name
// declares in files, the contract package's source: the roles the
// contract declares, its registry function and its rule for selecting
// entries from a config. A problem is a marker that does not parse, in
// words; the markers are then the zero value.
func readMarkers(files filesHolding, name string) (markers, string) {
	var mk markers
	marked, err := files(markerPrefix)
	if err != nil {
		return mk, fmt.Sprintf("reading its markers: %v", err)
	}
	doc := typeDoc(marked, name)
	if doc == nil {
		return mk, ""
	}
	seen := map[string]bool{}
	for _, c := range doc.List {
		text := strings.TrimSpace(c.Text)
		marker, rest, _ := strings.Cut(text, " ")
		if seen[marker] && (marker == MarkerRoles || marker == MarkerRegistry || marker == MarkerSelect) {
			return markers{}, fmt.Sprintf("%s's doc comment has more than one %s line", name, marker)
		}
		seen[marker] = true
		switch marker {
		case MarkerRoles:
			for _, field := range strings.Fields(rest) {
				role, iface, _ := strings.Cut(field, "=")
				if !token.IsIdentifier(role) && !plainRoleName(role) || iface != "" && !token.IsIdentifier(iface) {
					return markers{}, fmt.Sprintf("%s's %s line: %s is not name=Interface or a name", name, MarkerRoles, suggest.Quote(field))
				}
				if slices.ContainsFunc(mk.roles, func(r Role) bool { return r.Name == role }) {
					return markers{}, fmt.Sprintf("%s's %s line declares the role %s twice", name, MarkerRoles, suggest.Quote(role))
				}
				mk.roles = append(mk.roles, Role{Name: role, Interface: iface})
			}
			if len(mk.roles) == 0 {
				return markers{}, fmt.Sprintf("%s's %s line declares no role", name, MarkerRoles)
			}
		case MarkerRegistry:
			mk.registry = strings.TrimSpace(rest)
			if !token.IsIdentifier(mk.registry) {
				return markers{}, fmt.Sprintf("%s's %s line: %s is not the name of a function", name, MarkerRegistry, suggest.Quote(mk.registry))
			}
		case MarkerSelect:
			sel, problem := parseSelect(rest, files)
			if problem != "" {
				return markers{}, fmt.Sprintf("%s's %s line: %s", name, MarkerSelect, problem)
			}
			mk.sel = sel
		}
	}
	return mk, ""
}

// parseSelect parses what follows MarkerSelect: the key path that names
// an entry, then children=PATH, multi=Func and keys=KEY,KEY,... in any
// order. files are the contract package's, where multi's function is.
func parseSelect(rest string, files filesHolding) (*Select, string) {
	fields := strings.Fields(rest)
	if len(fields) == 0 || strings.Contains(fields[0], "=") {
		return nil, "want the key that names an entry first, as in kv_connector"
	}
	sel := &Select{Name: fields[0]}
	if !keyPath(sel.Name) {
		return nil, fmt.Sprintf("%s is not a key, or keys joined by dots", suggest.Quote(sel.Name))
	}
	seen := map[string]bool{}
	for _, field := range fields[1:] {
		opt, value, ok := strings.Cut(field, "=")
		if !ok || value == "" {
			return nil, fmt.Sprintf("%s is not children=PATH, multi=Func or keys=KEY,...", suggest.Quote(field))
		}
		if seen[opt] {
			return nil, fmt.Sprintf("%s= is given twice", opt)
		}
		seen[opt] = true
		switch opt {
		case "children":
			if !keyPath(value) {
				return nil, fmt.Sprintf("children=%s: want a key, or keys joined by dots", suggest.Quote(value))
			}
			sel.Children = value
		case "multi":
			if !token.IsIdentifier(value) {
				return nil, fmt.Sprintf("multi=%s: want the name of a function of the contract's package", suggest.Quote(value))
			}
			declaring, err := files(value)
			if err != nil {
				return nil, fmt.Sprintf("multi=%s: reading the contract's package: %v", value, err)
			}
			if !declaresFunc(declaring, value) {
				return nil, fmt.Sprintf("multi=%s: the contract's package has no function %s", value, suggest.Quote(value))
			}
			sel.Multi = value
		case "keys":
			for k := range strings.SplitSeq(value, ",") {
				if !plainKey(k) {
					return nil, fmt.Sprintf("keys=: %s is not a key", suggest.Quote(k))
				}
				if slices.Contains(sel.Keys, k) {
					return nil, fmt.Sprintf("keys=: %s is listed twice", suggest.Quote(k))
				}
				sel.Keys = append(sel.Keys, k)
			}
		default:
			near := suggest.Nearest(opt, []string{"children", "multi", "keys"}, 1)
			msg := fmt.Sprintf("unknown option %s=", suggest.Quote(opt))
			if len(near) > 0 {
				msg += fmt.Sprintf(" (did you mean %s=?)", near[0])
			}
			return nil, msg
		}
	}
	if sel.Multi != "" && sel.Children == "" {
		return nil, "multi= names the entries that have children, and there is no children= to say where they are"
	}
	if sel.Keys != nil {
		first, _, _ := strings.Cut(sel.Name, ".")
		if !slices.Contains(sel.Keys, first) {
			return nil, fmt.Sprintf("keys= does not list %s, the key that names an entry", suggest.Quote(first))
		}
		if first, _, _ := strings.Cut(sel.Children, "."); sel.Children != "" && !slices.Contains(sel.Keys, first) {
			return nil, fmt.Sprintf("keys= does not list %s, where the children are", suggest.Quote(first))
		}
	}
	marked, err := files(markerConstructor)
	if err != nil {
		return nil, fmt.Sprintf("reading its %s markers: %v", markerConstructor, err)
	}
	sel.marked = findMarked(marked)
	return sel, ""
}

// keyPath reports whether s is keys joined by dots.
func keyPath(s string) bool {
	for k := range strings.SplitSeq(s, ".") {
		if !plainKey(k) {
			return false
		}
	}
	return true
}

// plainKey reports whether s is a JSON key a marker can name: letters,
// digits, dashes and underscores.
func plainKey(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isLetter(c) && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

// declaresFunc reports whether files declare the function name.
func declaresFunc(files []*ast.File, name string) bool {
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil && fd.Name.Name == name {
				return true
			}
		}
	}
	return false
}

// plainRoleName reports whether s is a role name a manifest can write:
// a letter, then letters, digits, dashes and underscores.
func plainRoleName(s string) bool { return s != "" && isLetter(s[0]) && plainKey(s) }

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// typeDoc returns the doc comment of the type name, or nil.
func typeDoc(files []*ast.File, name string) *ast.CommentGroup {
	for _, f := range files {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				if ts.Name.Name != name {
					continue
				}
				if ts.Doc != nil {
					return ts.Doc
				}
				if len(g.Specs) == 1 {
					return g.Doc
				}
				return nil
			}
		}
	}
	return nil
}

// declaresType reports whether files declare the type name.
func declaresType(files []*ast.File, name string) bool {
	for _, f := range files {
		for _, d := range f.Decls {
			if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.TYPE {
				if slices.ContainsFunc(g.Specs, func(s ast.Spec) bool { return s.(*ast.TypeSpec).Name.Name == name }) {
					return true
				}
			}
		}
	}
	return false
}
