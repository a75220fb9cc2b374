package inner

import "github.com/kvgen/kvgen/registry/kv"

func Connector() kv.Connector {
	return undefinedThing
}
