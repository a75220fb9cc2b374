package gen

import (
	"fmt"
	"go/ast"
	"go/token"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/suggest"
)

// readMarkers reads the markers of the doc comment of the type name
// declares in files, the contract package's source: the roles the
// contract declares and its registry function. A problem is a marker that
// does not parse, in words.
func readMarkers(files []*ast.File, name string) (roles []Role, registry, problem string) {
	doc := typeDoc(files, name)
	if doc == nil {
		return nil, "", ""
	}
	seen := map[string]bool{}
	for _, c := range doc.List {
		text := strings.TrimSpace(c.Text)
		marker, rest, _ := strings.Cut(text, " ")
		if seen[marker] && (marker == MarkerRoles || marker == MarkerRegistry) {
			return nil, "", fmt.Sprintf("%s's doc comment has more than one %s line", name, marker)
		}
		seen[marker] = true
		switch marker {
		case MarkerRoles:
			for _, field := range strings.Fields(rest) {
				role, iface, _ := strings.Cut(field, "=")
				if !token.IsIdentifier(role) && !plainRoleName(role) || iface != "" && !token.IsIdentifier(iface) {
					return nil, "", fmt.Sprintf("%s's %s line: %s is not name=Interface or a name", name, MarkerRoles, suggest.Quote(field))
				}
				if slices.ContainsFunc(roles, func(r Role) bool { return r.Name == role }) {
					return nil, "", fmt.Sprintf("%s's %s line declares the role %s twice", name, MarkerRoles, suggest.Quote(role))
				}
				roles = append(roles, Role{Name: role, Interface: iface})
			}
			if len(roles) == 0 {
				return nil, "", fmt.Sprintf("%s's %s line declares no role", name, MarkerRoles)
			}
		case MarkerRegistry:
			registry = strings.TrimSpace(rest)
			if !token.IsIdentifier(registry) {
				return nil, "", fmt.Sprintf("%s's %s line: %s is not the name of a function", name, MarkerRegistry, suggest.Quote(registry))
			}
		}
	}
	return roles, registry, ""
}

// plainRoleName reports whether s is a role name a manifest can write:
// a letter, then letters, digits, dashes and underscores.
func plainRoleName(s string) bool {
	if s == "" || !isLetter(s[0]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isLetter(c) && (c < '0' || c > '9') && c != '-' && c != '_' {
			return false
		}
	}
	return true
}

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
