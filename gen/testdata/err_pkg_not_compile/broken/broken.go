package broken

import (
	"context"

	"github.com/kvgen/kvgen/registry"
)

func New(ctx context.Context, cfg registry.Config, role registry.Role) (registry.Connector, error) {
	return undefinedThing, nil
}
