package apitext

import (
	"fmt"
	"go/types"
	"slices"
	"strconv"
	"strings"
)

// Lines returns the API of pkg, one line per exported declaration,
// sorted, each starting "pkg PATH, ". The forms follow Go's api files:
//
//	const NAME TYPE and const NAME = VALUE
//	var NAME TYPE
//	func NAME[TYPEPARAMS](PARAMS) RESULTS
//	type NAME[TYPEPARAMS] = TYPE (an alias)
//	type NAME struct, and a line per exported field: type NAME struct, FIELD TYPE
//	    or type NAME struct, embedded TYPE
//	type NAME interface { METHODS }, and a line per method:
//	    type NAME interface, METHOD(PARAMS) RESULTS
//	type NAME UNDERLYING
//	method (RECEIVER) NAME(PARAMS) RESULTS
//
// Parameters have no names, which are not part of the API. A type of
// another package is written with its full import path, so that it is
// exact. Methods are those of the method sets of T and *T, promoted ones
// included, as an embedded type's methods are part of the API too; an
// interface lists its whole method set, or, when it has unexported
// methods, says so instead of listing names.
func Lines(pkg *types.Package) []string {
	w := &writer{pkg: pkg}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch obj := obj.(type) {
		case *types.Const:
			w.emit("const %s %s", name, w.typeString(obj.Type()))
			short, exact := obj.Val().String(), obj.Val().ExactString()
			if short == exact {
				w.emit("const %s = %s", name, short)
			} else {
				// String abbreviates long values; keep both, like Go's files.
				w.emit("const %s = %s  // %s", name, short, exact)
			}
		case *types.Var:
			w.emit("var %s %s", name, w.typeString(obj.Type()))
		case *types.Func:
			w.emit("func %s%s", name, w.signature(obj.Type().(*types.Signature)))
		case *types.TypeName:
			w.typeDecl(obj)
		}
	}
	slices.Sort(w.lines)
	return slices.Compact(w.lines)
}

type writer struct {
	pkg   *types.Package
	lines []string
}

func (w *writer) emit(format string, args ...any) {
	w.lines = append(w.lines, "pkg "+w.pkg.Path()+", "+fmt.Sprintf(format, args...))
}

func (w *writer) typeDecl(obj *types.TypeName) {
	name := obj.Name()
	if alias, ok := obj.Type().(*types.Alias); ok {
		w.emit("type %s%s = %s", name, w.typeParams(alias.TypeParams()), w.typeString(alias.Rhs()))
		return
	}
	if obj.IsAlias() {
		// An alias of a predeclared or instantiated type, when aliases
		// are not materialized.
		w.emit("type %s = %s", name, w.typeString(obj.Type()))
		return
	}
	named, ok := obj.Type().(*types.Named)
	if !ok {
		return
	}
	decl := name + w.typeParams(named.TypeParams())
	switch u := named.Underlying().(type) {
	case *types.Struct:
		w.emit("type %s struct", decl)
		for i := range u.NumFields() {
			f := u.Field(i)
			if !f.Exported() {
				continue
			}
			if f.Embedded() {
				w.emit("type %s struct, embedded %s", decl, w.typeString(f.Type()))
			} else {
				w.emit("type %s struct, %s %s", decl, f.Name(), w.typeString(f.Type()))
			}
		}
	case *types.Interface:
		w.interfaceDecl(decl, u)
		return // its methods are the interface's
	default:
		w.emit("type %s %s", decl, w.typeString(u))
	}
	w.methods(named)
}

func (w *writer) interfaceDecl(decl string, iface *types.Interface) {
	if !iface.IsMethodSet() {
		// A constraint: its type set is in the type itself.
		w.emit("type %s %s", decl, w.typeString(iface))
		return
	}
	var names []string
	complete := true
	for i := range iface.NumMethods() {
		m := iface.Method(i)
		if !m.Exported() {
			complete = false
			continue
		}
		names = append(names, m.Name())
		w.emit("type %s interface, %s%s", decl, m.Name(), w.signature(m.Type().(*types.Signature)))
	}
	switch {
	case !complete:
		// Only this package can implement it, so it may grow: record
		// that, not a list of names that would have to change.
		w.emit("type %s interface, unexported methods", decl)
	case len(names) == 0:
		w.emit("type %s interface {}", decl)
	default:
		slices.Sort(names)
		w.emit("type %s interface { %s }", decl, strings.Join(names, ", "))
	}
}

// methods emits the exported methods of the method sets of t and *t.
func (w *writer) methods(t *types.Named) {
	seen := map[string]bool{}
	for _, ptr := range []bool{false, true} {
		var recv types.Type = t
		if ptr {
			recv = types.NewPointer(t)
		}
		mset := types.NewMethodSet(recv)
		for i := range mset.Len() {
			sel := mset.At(i)
			m := sel.Obj()
			if !m.Exported() || seen[m.Name()] {
				continue
			}
			seen[m.Name()] = true
			// The receiver is that of the method set: T for the methods
			// of T, promoted ones included, *T for those only *T has.
			sig := sel.Type().(*types.Signature)
			w.emit("method (%s) %s%s", w.receiver(t, ptr), m.Name(), w.signature(sig))
		}
	}
}

// receiver writes t as a method's receiver: T, *T, or T[P, Q] with the
// names of its type parameters.
func (w *writer) receiver(t *types.Named, ptr bool) string {
	var b strings.Builder
	if ptr {
		b.WriteByte('*')
	}
	b.WriteString(t.Obj().Name())
	if tps := t.TypeParams(); tps.Len() > 0 {
		b.WriteByte('[')
		for i := range tps.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(tps.At(i).Obj().Name())
		}
		b.WriteByte(']')
	}
	return b.String()
}

// typeParams writes a type parameter list with constraints: [K comparable, V any].
func (w *writer) typeParams(tps *types.TypeParamList) string {
	if tps.Len() == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('[')
	for i := range tps.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		tp := tps.At(i)
		b.WriteString(tp.Obj().Name())
		b.WriteByte(' ')
		w.writeType(&b, tp.Constraint())
	}
	b.WriteByte(']')
	return b.String()
}

// signature writes sig without func and without parameter names:
// [T any](int, ...string) (T, error).
func (w *writer) signature(sig *types.Signature) string {
	var b strings.Builder
	b.WriteString(w.typeParams(sig.TypeParams()))
	w.writeSignature(&b, sig)
	return b.String()
}

func (w *writer) writeSignature(b *strings.Builder, sig *types.Signature) {
	params := sig.Params()
	b.WriteByte('(')
	for i := range params.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		t := params.At(i).Type()
		if sig.Variadic() && i == params.Len()-1 {
			b.WriteString("...")
			t = t.(*types.Slice).Elem()
		}
		w.writeType(b, t)
	}
	b.WriteByte(')')
	switch res := sig.Results(); res.Len() {
	case 0:
	case 1:
		b.WriteByte(' ')
		w.writeType(b, res.At(0).Type())
	default:
		b.WriteString(" (")
		for i := range res.Len() {
			if i > 0 {
				b.WriteString(", ")
			}
			w.writeType(b, res.At(i).Type())
		}
		b.WriteByte(')')
	}
}

func (w *writer) typeString(t types.Type) string {
	var b strings.Builder
	w.writeType(&b, t)
	return b.String()
}

// writeType writes t as source would, but with other packages' types
// qualified by their import path and no parameter names in func types.
func (w *writer) writeType(b *strings.Builder, t types.Type) {
	switch t := t.(type) {
	case *types.Basic:
		if t.Kind() == types.UnsafePointer {
			b.WriteString("unsafe.Pointer")
			return
		}
		b.WriteString(t.Name())
	case *types.Pointer:
		b.WriteByte('*')
		w.writeType(b, t.Elem())
	case *types.Slice:
		b.WriteString("[]")
		w.writeType(b, t.Elem())
	case *types.Array:
		fmt.Fprintf(b, "[%d]", t.Len())
		w.writeType(b, t.Elem())
	case *types.Map:
		b.WriteString("map[")
		w.writeType(b, t.Key())
		b.WriteByte(']')
		w.writeType(b, t.Elem())
	case *types.Chan:
		w.writeChan(b, t)
	case *types.Signature:
		b.WriteString("func")
		w.writeSignature(b, t)
	case *types.Struct:
		b.WriteString("struct{")
		for i := range t.NumFields() {
			if i > 0 {
				b.WriteString("; ")
			}
			f := t.Field(i)
			if !f.Embedded() {
				b.WriteString(f.Name())
				b.WriteByte(' ')
			}
			w.writeType(b, f.Type())
			if tag := t.Tag(i); tag != "" {
				b.WriteByte(' ')
				b.WriteString(strconv.Quote(tag))
			}
		}
		b.WriteByte('}')
	case *types.Interface:
		w.writeInterface(b, t)
	case *types.Union:
		for i := range t.Len() {
			if i > 0 {
				b.WriteString(" | ")
			}
			term := t.Term(i)
			if term.Tilde() {
				b.WriteByte('~')
			}
			w.writeType(b, term.Type())
		}
	case *types.Named:
		w.writeName(b, t.Obj())
		w.writeTypeArgs(b, t.TypeArgs())
	case *types.Alias:
		w.writeName(b, t.Obj())
		w.writeTypeArgs(b, t.TypeArgs())
	case *types.TypeParam:
		b.WriteString(t.Obj().Name())
	default:
		b.WriteString(types.TypeString(t, w.qualifier))
	}
}

func (w *writer) writeChan(b *strings.Builder, t *types.Chan) {
	paren := false
	switch t.Dir() {
	case types.SendRecv:
		b.WriteString("chan ")
		// chan <-chan T would read as chan<- chan T.
		if c, ok := t.Elem().(*types.Chan); ok && c.Dir() == types.RecvOnly {
			paren = true
		}
	case types.SendOnly:
		b.WriteString("chan<- ")
	case types.RecvOnly:
		b.WriteString("<-chan ")
	}
	if paren {
		b.WriteByte('(')
	}
	w.writeType(b, t.Elem())
	if paren {
		b.WriteByte(')')
	}
}

func (w *writer) writeInterface(b *strings.Builder, t *types.Interface) {
	if t.IsImplicit() {
		// A constraint written as its type set: [T ~int | ~string].
		for i := range t.NumEmbeddeds() {
			if i > 0 {
				b.WriteString("; ")
			}
			w.writeType(b, t.EmbeddedType(i))
		}
		return
	}
	if t.NumEmbeddeds() == 0 && t.NumExplicitMethods() == 0 {
		b.WriteString("interface{}")
		return
	}
	b.WriteString("interface{ ")
	first := true
	sep := func() {
		if !first {
			b.WriteString("; ")
		}
		first = false
	}
	for i := range t.NumEmbeddeds() {
		sep()
		w.writeType(b, t.EmbeddedType(i))
	}
	for i := range t.NumExplicitMethods() {
		sep()
		m := t.ExplicitMethod(i)
		b.WriteString(m.Name())
		w.writeSignature(b, m.Type().(*types.Signature))
	}
	b.WriteString(" }")
}

func (w *writer) writeName(b *strings.Builder, obj *types.TypeName) {
	if q := w.qualifier(obj.Pkg()); q != "" {
		b.WriteString(q)
		b.WriteByte('.')
	}
	b.WriteString(obj.Name())
}

func (w *writer) writeTypeArgs(b *strings.Builder, args *types.TypeList) {
	if args.Len() == 0 {
		return
	}
	b.WriteByte('[')
	for i := range args.Len() {
		if i > 0 {
			b.WriteString(", ")
		}
		w.writeType(b, args.At(i))
	}
	b.WriteByte(']')
}

// qualifier names other packages by import path, which, unlike a
// package name, is exact; the package itself goes unnamed.
func (w *writer) qualifier(p *types.Package) string {
	if p == nil || p == w.pkg {
		return ""
	}
	return p.Path()
}
