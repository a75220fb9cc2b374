// Package stage is a contract other than the KV connector's whose plugins
// serve roles, and whose registry is a type of its own: what kvgen reads
// from the markers of Factory's doc comment, with no code of its own for
// this contract.
package stage

import (
	"fmt"

	"github.com/kvgen/kvgen/registry"
)

// Factory makes a stage named name. A stage filters, scores, or both.
//
//kvgen:roles filter=Filter scorer=Scorer
//kvgen:registry NewRegistry
type Factory func(name string) (Stage, error)

// Stage is one stage of a pipeline.
type Stage interface {
	Name() string
}

// Filter is the interface of the filter role.
type Filter interface {
	Stage
	Keep(x int) bool
}

// Scorer is the interface of the scorer role.
type Scorer interface {
	Stage
	Score(x int) float64
}

// Registry is the registry a host uses: the generated table, which it
// creates stages from for a role.
type Registry struct {
	table *registry.Table[Factory]
}

// NewRegistry is the registry of the stages t holds.
func NewRegistry(t *registry.Table[Factory]) *Registry { return &Registry{table: t} }

// Table is the generated table.
func (r *Registry) Table() *registry.Table[Factory] { return r.table }

// Create makes the stage name for role, which its entry must serve.
func (r *Registry) Create(name, role string) (Stage, error) {
	e, ok := r.table.Entry(name)
	if !ok {
		err := r.table.Unknown(name)
		err.Noun = "stage"
		return nil, err
	}
	if !e.Serves(role) {
		return nil, fmt.Errorf("stage %q does not serve the %s role", name, role)
	}
	s, err := e.Factory(name)
	if err != nil {
		return nil, err
	}
	switch _, isFilter := s.(Filter); {
	case role == "filter" && !isFilter:
		return nil, fmt.Errorf("stage %q: %T is not a Filter", name, s)
	}
	if _, isScorer := s.(Scorer); role == "scorer" && !isScorer {
		return nil, fmt.Errorf("stage %q: %T is not a Scorer", name, s)
	}
	return s, nil
}
