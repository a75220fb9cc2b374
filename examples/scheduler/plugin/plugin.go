// Package plugin is the plugin contract of the example scheduler, shaped
// like the llm-d inference scheduler's: a factory makes a named plugin
// from its JSON parameters, and a plugin filters the candidate pods, scores
// them, or both.
package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Factory makes the plugin an instance of the configuration names, from
// its parameters.
//
// A plugin serves the role filter, scorer or both, as its manifest entry's
// roles: says (both without one); kvgen checks that a constructor
// returning a concrete type implements the interface of each role its
// entry serves:
//
//kvgen:roles filter=Filter scorer=Scorer
type Factory func(name string, params json.RawMessage) (Plugin, error)

// Plugin is one configured plugin instance.
type Plugin interface {
	// Name is the instance's name in the configuration.
	Name() string
}

// Filter is a plugin that removes pods from the candidates.
type Filter interface {
	Plugin
	Filter(req Request, pods []Pod) []Pod
}

// Scorer is a plugin that scores each candidate pod from 0 to 1.
type Scorer interface {
	Plugin
	Score(req Request, pods []Pod) map[string]float64
}

// Request is what the scheduler places.
type Request struct {
	Model  string `json:"model"`
	Prompt string `json:"prompt"`
}

// Pod is a candidate model server, with the metrics the plugins read.
type Pod struct {
	Name         string  `json:"name"`
	QueueDepth   int     `json:"queue_depth"`
	KVCacheUsage float64 `json:"kv_cache_usage"` // 0 to 1
}

// Weighted is a plugin with the weight of its scores.
type Weighted struct {
	Plugin
	Weight float64
}

// Pick runs the filters, then picks the pod with the highest weighted
// score; ties go to the pod listed first. It returns each pod's total.
func Pick(plugins []Weighted, req Request, pods []Pod) (Pod, map[string]float64, error) {
	for _, p := range plugins {
		if f, ok := p.Plugin.(Filter); ok {
			pods = f.Filter(req, pods)
		}
	}
	if len(pods) == 0 {
		return Pod{}, nil, errors.New("no pod passes the filters")
	}
	total := make(map[string]float64, len(pods))
	for _, p := range plugins {
		s, ok := p.Plugin.(Scorer)
		if !ok {
			continue
		}
		for pod, score := range s.Score(req, pods) {
			total[pod] += p.Weight * score
		}
	}
	best := pods[0]
	for _, pod := range pods[1:] {
		if total[pod.Name] > total[best.Name] {
			best = pod
		}
	}
	return best, total, nil
}

// Params decodes a plugin's parameters into v, refusing keys v lacks.
func Params(name string, params json.RawMessage, v any) error {
	if len(params) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("plugin %q: parameters: %w", name, err)
	}
	return nil
}
