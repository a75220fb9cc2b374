package kvgentest

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"
)

// EachChange changes every field reachable from the value v points to,
// one at a time, and fails unless key, a function of that value, changes
// with each; it puts every field back as it was. A field of an interface
// type is changed to others' value of that type. A field it cannot change
// (a kind it does not know, an empty slice or map) fails the test, so that
// a new field of a cache key's input cannot go unchecked.
func EachChange(t *testing.T, v any, key func() string, others map[reflect.Type]any) {
	t.Helper()
	base := key()
	if base == "" {
		t.Fatal("no key for the base value")
	}
	changes := 0
	w := walker{t: t, others: others}
	w.walk(reflect.ValueOf(v).Elem(), reflect.TypeOf(v).Elem().Name(), func(path string) {
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

// walker is what EachChange's walk needs.
type walker struct {
	t      *testing.T
	others map[reflect.Type]any
}

// walk changes each field of the addressable v in turn, calling changed
// after each change, and then puts it back.
func (w walker) walk(v reflect.Value, path string, changed func(path string)) {
	t := w.t
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
		w.walk(v.Elem(), path, changed)
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Field(i)
			// Unexported fields too: an encoding that leaves them out
			// must fail here.
			f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
			w.walk(f, path+"."+v.Type().Field(i).Name, changed)
		}
	case reflect.Slice:
		w.walkSlice(v, was, path, changed)
	case reflect.Map:
		w.walkMap(v, was, path, changed)
	case reflect.Interface:
		other, ok := w.others[v.Type()]
		if !ok {
			t.Fatalf("%s is a %s, which the test cannot change; give EachChange one", path, v.Type())
		}
		v.Set(reflect.ValueOf(other))
		changed(path)
	default:
		t.Fatalf("%s is a %s, which the test cannot change; teach walk to", path, v.Kind())
	}
}

// walkSlice is walk of a slice v, whose value was is.
func (w walker) walkSlice(v, was reflect.Value, path string, changed func(path string)) {
	t := w.t
	t.Helper()
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
	w.walk(v.Index(0), path+"[0]", changed)
}

// walkMap is walk of a map v, whose value was is.
func (w walker) walkMap(v, was reflect.Value, path string, changed func(path string)) {
	t := w.t
	t.Helper()
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
	w.walk(more, path+" (another key)", func(p string) {
		m.SetMapIndex(more, was.MapIndex(k))
		v.Set(m)
		changed(p)
		m.SetMapIndex(more, reflect.Value{})
	})
	m = copied()
	v.Set(m)
	elem := reflect.New(v.Type().Elem()).Elem()
	elem.Set(was.MapIndex(k))
	w.walk(elem, fmt.Sprintf("%s[%v]", path, k), func(p string) {
		m.SetMapIndex(k, elem)
		changed(p)
	})
}
