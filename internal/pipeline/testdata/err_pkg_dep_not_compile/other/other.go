package other

import (
	"context"

	"example.com/kvcase/other/inner2"
	"github.com/kvgen/kvgen/registry/kv"
)

func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return inner2.Connector(), nil
}
