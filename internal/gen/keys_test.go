package gen

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	"github.com/dave/jennifer/jen"
)

// A changed input to a constructor's check is a new key: every field of
// checkInput, walked by reflection so that no field can be left out.
func TestCheckKeyHoldsEveryField(t *testing.T) {
	cache := &manifestCache{path: "cache.json", salt: "kvgen-test"}
	in := checkInput{
		RegistryExport: "aaaa-d", ContractExport: "bbbb-d", PackageExport: "cccc-d",
		Factory: "example.com/text.Transform", Roles: []Role{{Name: "worker", Interface: "Worker"}}, Registry: "NewRegistry",
		ImportPath: "example.com/shout", Constructor: "New", EntryRoles: []string{"worker"},
	}
	eachChange(t, &in, func() string { return cache.key(in) })
}

// A changed input to the registry file is a new render key, so that
// kvgen check renders the file again: every field of renderInput, walked
// by reflection, the contract's adapter too, whose types differ here only
// in the path of a package of the same name.
func TestRenderKeyHoldsEveryField(t *testing.T) {
	cache := &manifestCache{path: "cache.json", salt: "kvgen-test"}
	in := renderInput{
		Manifest: "../connectors.yaml",
		Package:  "main",
		Contract: renderContract{
			Path: "example.com/text", Name: "Factory", PkgName: "text", Registry: "NewRegistry",
			Imports: map[string]string{"example.com/old/opts": "opts"},
			Adapter: adapterSig{
				params:  []adapterParam{{name: "o", typ: jen.Qual("example.com/old/opts", "Options")}},
				results: []jen.Code{jen.Qual("example.com/text", "Plugin"), jen.Error()},
			},
		},
		Desc: "{}",
		Entries: []renderEntry{{Name: "shout", ImportPath: "example.com/shout", PkgName: "shout", Constructor: "New",
			Module: "example.com", Aliases: []string{"loud"}, Roles: []string{"worker"}, Adapt: true, Description: "shouts"}},
		Declared: map[string]bool{"main": true},
	}
	eachChange(t, &in, func() string { return cache.hash(in) })
}

// A changed input to a run is a new warm key, so that the run loads and
// checks its packages: every field of warmInput, walked by reflection.
func TestWarmKeyHoldsEveryField(t *testing.T) {
	cache := &manifestCache{path: "cache.json", salt: "kvgen-test"}
	in := warmInput{
		Generator: "kvgen-check-1 kvgen v0.1.0",
		WorkDir:   "/src/host", Manifest: "connectors.yaml", Output: "reg/connectors_gen.go",
		Only: []string{"redis"}, NoOnly: false,
		Tags: []string{"prod"}, TrimPath: true, LoadDir: "/src/host/reg",
		Manifests: "aaaa",
		File:      "/src/host/reg/connectors_gen.go",
		GoMod:     "/src/host/go.mod", GoModSHA256: "bbbb", GoSumSHA256: "cccc",
		Package: "reg", Declared: map[string]bool{"Version": true},
		GoEnv: []string{"go1.26.0", "linux", "amd64"}, GoFlags: "-trimpath",
		GoDebug: "gotypesalias=1", OwnGoDebug: "gotypesalias=1",
	}
	eachChange(t, &in, func() string { return cache.hash(in) })
}

// eachChange changes every field reachable from the value v points to,
// one at a time, and fails unless key, a function of that value, changes
// with each; it puts every field back as it was. A field it cannot change
// (a kind it does not know, an empty slice or map) fails the test, so that
// a new field cannot go unchecked.
func eachChange(t *testing.T, v any, key func() string) {
	t.Helper()
	base := key()
	if base == "" {
		t.Fatal("no key for the base value")
	}
	changes := 0
	walk(t, reflect.ValueOf(v).Elem(), reflect.TypeOf(v).Elem().Name(), func(path string) {
		t.Helper()
		changes++
		if key() == base {
			t.Errorf("changing %s leaves the key as it was", path)
		}
	})
	if key() != base {
		t.Fatal("the walk did not put every field back")
	}
	t.Logf("%d changes", changes)
}

// walk changes each field of the addressable v in turn, calling changed
// after each change, and then puts it back.
func walk(t *testing.T, v reflect.Value, path string, changed func(path string)) {
	t.Helper()
	was := reflect.New(v.Type()).Elem()
	was.Set(v)
	defer v.Set(was)
	switch v.Kind() {
	case reflect.String:
		v.SetString(v.String() + "x")
		changed(path)
	case reflect.Bool:
		v.SetBool(!v.Bool())
		changed(path)
	case reflect.Int:
		v.SetInt(v.Int() + 1)
		changed(path)
	case reflect.Pointer:
		if v.IsNil() {
			t.Fatalf("%s is nil; give it a value to change", path)
		}
		walk(t, v.Elem(), path, changed)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			// Unexported fields too: an encoding that leaves them out
			// must fail here.
			f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			walk(t, f, path+"."+v.Type().Field(i).Name, changed)
		}
	case reflect.Slice:
		if v.Len() == 0 {
			t.Fatalf("%s is empty; give it an element to change", path)
		}
		v.Set(reflect.Append(v.Slice3(0, v.Len(), v.Len()), v.Index(0)))
		changed(path + " (one more element)")
		v.Set(was)
		// A copy, so that changing an element leaves was alone.
		elems := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		reflect.Copy(elems, was)
		v.Set(elems)
		walk(t, v.Index(0), path+"[0]", changed)
	case reflect.Map:
		if v.Len() == 0 {
			t.Fatalf("%s is empty; give it an entry to change", path)
		}
		k := v.MapKeys()[0]
		copied := func() reflect.Value {
			m := reflect.MakeMapWithSize(v.Type(), v.Len()+1)
			for _, k := range was.MapKeys() {
				m.SetMapIndex(k, was.MapIndex(k))
			}
			return m
		}
		m := copied()
		more := reflect.New(k.Type()).Elem()
		more.Set(k)
		walk(t, more, path+" (another key)", func(p string) {
			m.SetMapIndex(more, was.MapIndex(k))
			v.Set(m)
			changed(p)
			m.SetMapIndex(more, reflect.Value{})
		})
		m = copied()
		v.Set(m)
		elem := reflect.New(v.Type().Elem()).Elem()
		elem.Set(was.MapIndex(k))
		walk(t, elem, fmt.Sprintf("%s[%v]", path, k), func(p string) {
			m.SetMapIndex(k, elem)
			changed(p)
		})
	case reflect.Interface:
		other, ok := otherValues[v.Type()]
		if !ok {
			t.Fatalf("%s is a %s, which the test cannot change; add one to otherValues", path, v.Type())
		}
		v.Set(reflect.ValueOf(other))
		changed(path)
	default:
		t.Fatalf("%s is a %s, which the test cannot change; teach walk to", path, v.Kind())
	}
}

// otherValues are values of interface types to change fields to.
var otherValues = map[reflect.Type]any{
	reflect.TypeFor[jen.Code](): jen.Qual("example.com/new/opts", "Options"),
}
