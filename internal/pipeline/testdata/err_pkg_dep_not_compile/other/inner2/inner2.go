package inner2

import "github.com/kvgen/kvgen/registry/kv"

func Connector() kv.Connector {
	return otherUndefined
}
