package uses

import (
	"context"

	"example.com/kvcase/uses/inner"
	"github.com/kvgen/kvgen/registry/kv"
)

func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return inner.Connector(), nil
}
