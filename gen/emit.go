package gen

import (
	"bytes"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/dave/jennifer/jen"

	"github.com/kvgen/kvgen/registry"
)

// emit renders the registry file. Every manifest string reaches the file
// through jen.Lit, so no value can change the code around it.
func emit(manifestFile, pkgName string, entries []*Entry, declared map[string]bool) ([]byte, error) {
	f := jen.NewFile(pkgName)
	name := commentName(filepath.Base(manifestFile))
	f.HeaderComment(header(name))

	for _, imp := range importNames(entries, declared) {
		if imp.alias {
			f.ImportAlias(imp.path, imp.name)
		} else {
			f.ImportName(imp.path, imp.name)
		}
	}

	reg := func(name string) *jen.Statement { return jen.Qual(RegistryPath, name) }
	items := make([]jen.Code, 0, len(entries))
	for _, e := range entries {
		field := func(name string, value jen.Code) jen.Code {
			return jen.Line().Id(name).Op(":").Add(value)
		}
		fields := []jen.Code{field("Name", jen.Lit(e.Name))}
		if len(e.Aliases) > 0 {
			lits := make([]jen.Code, len(e.Aliases))
			for i, a := range e.Aliases {
				lits[i] = jen.Lit(a)
			}
			fields = append(fields, field("Aliases", jen.Index().String().Values(lits...)))
		}
		fields = append(fields,
			field("ImportPath", jen.Lit(e.ImportPath)),
			field("Constructor", jen.Lit(e.Constructor)))
		if e.Module != "" {
			fields = append(fields, field("Module", jen.Lit(e.Module)))
		}
		fields = append(fields,
			field("Roles", roleSet(e.Roles, reg)),
			field("Factory", factory(e, reg)),
			jen.Line())
		items = append(items, jen.Line().Add(reg("Entry")).Values(fields...))
	}
	items = append(items, jen.Line())

	f.Comment(fmt.Sprintf("Registry holds the connectors that %s lists, in its order.", name))
	f.Comment("Create a connector with Registry.Create(ctx, cfg, role).")
	f.Var().Id("Registry").Op("=").Add(reg("MustNew")).Call(items...)

	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, fmt.Errorf("rendering the registry: %w", err)
	}
	return buf.Bytes(), nil
}

// commentName is a file name as a comment shows it: as it is when every
// character is printable, else as a Go string literal with the rest
// escaped. A name cannot then end the comment's line, split the header
// that marks the file as generated, or hide text behind bidirectional-text
// controls.
func commentName(name string) string {
	q := strconv.QuoteToGraphic(name)
	if q[1:len(q)-1] == name {
		return name
	}
	return q
}

// factory is the entry's Factory: the constructor itself when its signature
// is registry.Factory's, otherwise the constructor wrapped by registry.Adapt.
func factory(e *Entry, reg func(string) *jen.Statement) jen.Code {
	ctor := jen.Qual(e.ImportPath, e.Constructor)
	if !e.Adapt {
		return ctor
	}
	return reg("Adapt").Call(ctor)
}

func roleSet(s registry.RoleSet, reg func(string) *jen.Statement) jen.Code {
	var roles []jen.Code
	for _, r := range s.List() {
		switch r {
		case registry.RoleScheduler:
			roles = append(roles, reg("RoleScheduler"))
		case registry.RoleWorker:
			roles = append(roles, reg("RoleWorker"))
		}
	}
	return reg("NewRoleSet").Call(roles...)
}

// importName is the name the generated file imports a package under.
type importName struct {
	path, name string
	alias      bool // name is not the package's own
}

// importNames gives every imported package its own name: the real package
// name where it is free, else the name with the smallest free number
// appended. kvgen assigns them itself because jennifer's collision search
// grows with the cube of the number of same-named packages.
func importNames(entries []*Entry, declared map[string]bool) []importName {
	// The registry package keeps its name unless the output package
	// declares it.
	reg := importName{path: RegistryPath, name: "registry"}
	if declared[reg.name] {
		reg.name, reg.alias = "kvregistry", true
	}
	imports := []importName{reg}
	named := map[string]bool{RegistryPath: true}
	// Besides the imports, the file uses these identifiers; an import
	// named like one of them would shadow it or be shadowed.
	taken := map[string]bool{reg.name: true, "Registry": true, "string": true}
	for name := range declared {
		taken[name] = true
	}
	// An alias is never another imported package's own name, so that
	// package can keep it.
	realNames := map[string]bool{"registry": true}
	for _, e := range entries {
		realNames[e.PkgName] = true
	}
	// Counters remember where each name's search stopped, so that N
	// packages with one name cost O(N), not O(N^2).
	next := map[string]int{}
	for _, e := range entries {
		if named[e.ImportPath] {
			continue
		}
		named[e.ImportPath] = true
		imp := importName{path: e.ImportPath, name: e.PkgName}
		if taken[imp.name] {
			n := max(next[imp.name], 2)
			for taken[imp.name+strconv.Itoa(n)] || realNames[imp.name+strconv.Itoa(n)] {
				n++
			}
			next[imp.name] = n + 1
			imp.name, imp.alias = imp.name+strconv.Itoa(n), true
		}
		taken[imp.name] = true
		imports = append(imports, imp)
	}
	return imports
}

// renderKey names everything emit reads, so that the check cache can tell
// that a file already rendered from the same inputs is current without
// rendering it again. salt names the generator.
func renderKey(salt, manifestFile, pkgName string, entries []*Entry, declared map[string]bool) string {
	if salt == "" {
		return ""
	}
	fields := []string{salt, manifestFile, pkgName}
	for _, name := range slices.Sorted(maps.Keys(declared)) {
		fields = append(fields, "declared", name)
	}
	for _, e := range entries {
		fields = append(fields, "entry", e.Name, e.ImportPath, e.PkgName, e.Constructor, e.Module,
			strconv.Itoa(int(e.Roles)), strconv.FormatBool(e.Adapt), strconv.Itoa(len(e.Aliases)))
		fields = append(fields, e.Aliases...)
	}
	return hashFields(fields...)
}
