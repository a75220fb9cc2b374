// Package kvcache scores pods by how much of their KV cache is free.
package kvcache

import (
	"encoding/json"

	"github.com/kvgen/kvgen/examples/scheduler/plugin"
)

// Scorer prefers the pod with the most free KV cache.
type Scorer struct{ name string }

// NewScorer makes a KV-cache utilization scorer; it takes no parameters.
// It returns its concrete type, which the generated registry adapts to
// plugin.Factory, and which kvgen checks is a plugin.Scorer, the interface
// of the role its manifest entry serves.
func NewScorer(name string, params json.RawMessage) (*Scorer, error) {
	if err := plugin.Params(name, params, &struct{}{}); err != nil {
		return nil, err
	}
	return &Scorer{name: name}, nil
}

// Name is the instance's name.
func (s *Scorer) Name() string { return s.name }

// Score is the free fraction of each pod's KV cache.
func (s *Scorer) Score(_ plugin.Request, pods []plugin.Pod) map[string]float64 {
	scores := make(map[string]float64, len(pods))
	for _, p := range pods {
		scores[p.Name] = 1 - p.KVCacheUsage
	}
	return scores
}
