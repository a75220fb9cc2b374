package kv

import (
	"go/parser"
	"go/token"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Factory's //kvgen:select line, which kvgen build -for reads as data to
// tell which connectors a transfer config creates, says what
// ParseTransferConfig and NewMultiConnector do: the key that names the
// connector, where a MultiConnector's children are, which constructor is
// the MultiConnector, and every key a transfer config may have.
func TestSelectMarkerMatchesParsing(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "connector.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for _, g := range f.Comments {
		for _, c := range g.List {
			if rest, ok := strings.CutPrefix(c.Text, "//kvgen:select "); ok {
				line = rest
			}
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 {
		t.Fatal("connector.go has no //kvgen:select line")
	}
	opts := map[string]string{}
	for _, f := range fields[1:] {
		k, v, _ := strings.Cut(f, "=")
		opts[k] = v
	}
	tag, _, _ := strings.Cut(reflect.TypeFor[multiOptions]().Field(0).Tag.Get("json"), ",")
	want := map[string]string{
		"name":     "kv_connector",
		"children": "kv_connector_extra_config." + tag,
		"multi":    multiConstructor,
		"keys":     strings.Join(transferKeys, ","),
	}
	got := map[string]string{"name": fields[0], "children": opts["children"], "multi": opts["multi"], "keys": opts["keys"]}
	for k := range want {
		if got[k] != want[k] {
			t.Errorf("//kvgen:select %s: got %q, want %q", k, got[k], want[k])
		}
	}
	if !slices.Contains(transferKeys, fields[0]) {
		t.Errorf("%q is no key of a transfer config", fields[0])
	}
}
