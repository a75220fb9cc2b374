package kv

import (
	"fmt"
	"strings"

	"github.com/kvgen/kvgen/internal/suggest"
)

// Role is the side of the engine a connector instance serves. vLLM builds
// the two sides separately and so does kvgen: a constructor runs once per
// role, and in a single-process deployment twice in the same process.
type Role uint8

// The roles a connector can be created for.
const (
	RoleScheduler Role = 1 << iota
	RoleWorker
)

// Roles returns every role, in the order they are documented. It is a
// new slice each time: no caller can change what another sees.
func Roles() []Role { return []Role{RoleScheduler, RoleWorker} }

// String returns the role's name as written in connectors.yaml.
func (r Role) String() string {
	switch r {
	case RoleScheduler:
		return "scheduler"
	case RoleWorker:
		return "worker"
	}
	return fmt.Sprintf("Role(%d)", uint8(r))
}

// ParseRole parses a role name as written in connectors.yaml. Its error
// suggests the nearest name.
func ParseRole(s string) (Role, error) {
	var names []string
	for _, r := range Roles() {
		if r.String() == s {
			return r, nil
		}
		names = append(names, r.String())
	}
	if near := suggest.Nearest(s, names, 1); len(near) > 0 {
		return 0, fmt.Errorf("unknown role %s; did you mean %q?", suggest.Quote(s), near[0])
	}
	return 0, fmt.Errorf("unknown role %s; want %s", suggest.Quote(s), strings.Join(names, " or "))
}
