package broken

import (
	"context"

	"github.com/kvgen/kvgen/registry/kv"
)

func New(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
	return undefinedThing, nil
}
