package gen

import (
	"bytes"
	"encoding/json"
	"go/token"
	"go/types"
	"strconv"

	"github.com/dave/jennifer/jen"
)

// adapterSig is what the adapter function of a constructor declares: the
// contract's parameters and results, as the generated file renders them.
type adapterSig struct {
	params   []adapterParam
	results  []jen.Code
	variadic bool
}

type adapterParam struct {
	name string
	typ  jen.Code
}

// newAdapterSig is the adapter signature of the function contract sig:
// its parameters keep the contract's names where it has them.
func newAdapterSig(sig *types.Signature) adapterSig {
	a := adapterSig{variadic: sig.Variadic()}
	seen := map[string]bool{}
	for i := range sig.Params().Len() {
		v := sig.Params().At(i)
		name := v.Name()
		if name == "" || name == "_" || seen[name] || token.IsKeyword(name) {
			name = "p" + strconv.Itoa(i)
		}
		seen[name] = true
		t := v.Type()
		if a.variadic && i == sig.Params().Len()-1 {
			a.params = append(a.params, adapterParam{name, jen.Op("...").Add(typeCode(t.(*types.Slice).Elem()))})
			continue
		}
		a.params = append(a.params, adapterParam{name, typeCode(t)})
	}
	for i := range sig.Results().Len() {
		a.results = append(a.results, typeCode(sig.Results().At(i).Type()))
	}
	return a
}

// MarshalJSON encodes the adapter, for the render key, as the Go source
// of an adapter, whose imports name each package by its path: jen.Code
// has no encoding of its own.
func (a adapterSig) MarshalJSON() ([]byte, error) {
	f := jen.NewFile("adapter")
	f.Var().Id("_").Op("=").Add(adapterLit(renderEntry{ImportPath: "adapter/constructor", Constructor: "New"}, a))
	var buf bytes.Buffer
	if err := f.Render(&buf); err != nil {
		return nil, err
	}
	return json.Marshal(buf.String())
}

// names are the adapter's parameter names.
func (a adapterSig) names() []string {
	var names []string
	for _, p := range a.params {
		names = append(names, p.name)
	}
	return names
}

// typeCode is t as the generated file writes it, each package named
// through jen.Qual so that the file imports it.
func typeCode(t types.Type) jen.Code {
	switch t := t.(type) {
	case *types.Alias:
		return typeCode(types.Unalias(t))
	case *types.Named:
		obj := t.Obj()
		var s *jen.Statement
		if obj.Pkg() == nil {
			s = jen.Id(obj.Name()) // error, comparable
		} else {
			s = jen.Qual(obj.Pkg().Path(), obj.Name())
		}
		if args := t.TypeArgs(); args.Len() > 0 {
			var codes []jen.Code
			for a := range args.Types() {
				codes = append(codes, typeCode(a))
			}
			s = s.Types(codes...)
		}
		return s
	case *types.Basic:
		return jen.Id(t.Name())
	case *types.Pointer:
		return jen.Op("*").Add(typeCode(t.Elem()))
	case *types.Slice:
		return jen.Index().Add(typeCode(t.Elem()))
	case *types.Array:
		return jen.Index(jen.Lit(int(t.Len()))).Add(typeCode(t.Elem()))
	case *types.Map:
		return jen.Map(typeCode(t.Key())).Add(typeCode(t.Elem()))
	case *types.Chan:
		switch t.Dir() {
		case types.SendOnly:
			return jen.Chan().Op("<-").Add(typeCode(t.Elem()))
		case types.RecvOnly:
			return jen.Op("<-").Chan().Add(typeCode(t.Elem()))
		}
		return jen.Chan().Add(typeCode(t.Elem()))
	case *types.Signature:
		a := newAdapterSig(t)
		var params []jen.Code
		for _, p := range a.params {
			params = append(params, p.typ)
		}
		return jen.Func().Params(params...).Params(a.results...)
	case *types.Interface:
		if t.Empty() {
			return jen.Any()
		}
	}
	// A struct or interface literal: written as go/types prints it, with
	// the packages it names by their own names.
	return jen.Op(types.TypeString(t, (*types.Package).Name))
}

// adapterLit is a function literal that calls the entry's constructor,
// whose result is a concrete type, and returns that as the contract's.
// It captures nothing, so the compiler lays it out as static data, as it
// does a named function; but it compiles in about a third of the time a
// named function takes, which goes into the package's export data too.
func adapterLit(e renderEntry, a adapterSig) jen.Code {
	var params, args []jen.Code
	for i, p := range a.params {
		params = append(params, jen.Id(p.name).Add(p.typ))
		arg := jen.Id(p.name)
		if a.variadic && i == len(a.params)-1 {
			arg.Op("...")
		}
		args = append(args, arg)
	}
	call := jen.Return(jen.Qual(e.ImportPath, e.Constructor).Call(args...))
	if len(a.results) == 1 {
		return jen.Func().Params(params...).Add(a.results[0]).Block(call)
	}
	return jen.Func().Params(params...).Params(a.results...).Block(call)
}
