package gen

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/dave/jennifer/jen"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// A changed input to the registry file is a new render key, so that
// kvgen check renders the file again: every field of RenderInput, walked
// by reflection, the contract's adapter too, whose types differ here only
// in the path of a package of the same name.
func TestRenderKeyHoldsEveryField(t *testing.T) {
	in := RenderInput{
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
	kvgentest.EachChange(t, &in, func() string { return jsonKey(t, in) }, otherValues)
}

// jsonKey is what a cache hashes of in: its JSON.
func jsonKey(t *testing.T, in any) string {
	data, err := json.Marshal(in)
	require.NoError(t, err)
	return string(data)
}

// otherValues are values of interface types to change fields to.
var otherValues = map[reflect.Type]any{
	reflect.TypeFor[jen.Code](): jen.Qual("example.com/new/opts", "Options"),
}
