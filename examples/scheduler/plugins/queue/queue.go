// Package queue scores pods by the depth of their request queue.
package queue

import (
	"encoding/json"

	"github.com/kvgen/kvgen/examples/scheduler/plugin"
)

// Scorer prefers the pod with the shortest queue.
type Scorer struct{ name string }

// New makes a queue scorer; it takes no parameters.
//
//kvgen:constructor
func New(name string, params json.RawMessage) (plugin.Plugin, error) {
	if err := plugin.Params(name, params, &struct{}{}); err != nil {
		return nil, err
	}
	return &Scorer{name: name}, nil
}

// Name is the instance's name.
func (s *Scorer) Name() string { return s.name }

// Score is 1 for the shortest queue, 0 for the longest.
func (s *Scorer) Score(_ plugin.Request, pods []plugin.Pod) map[string]float64 {
	lo, hi := pods[0].QueueDepth, pods[0].QueueDepth
	for _, p := range pods {
		lo, hi = min(lo, p.QueueDepth), max(hi, p.QueueDepth)
	}
	scores := make(map[string]float64, len(pods))
	for _, p := range pods {
		if hi == lo {
			scores[p.Name] = 1
			continue
		}
		scores[p.Name] = float64(hi-p.QueueDepth) / float64(hi-lo)
	}
	return scores
}
