// Package lowqueue filters out pods whose queue is too deep.
package lowqueue

import (
	"encoding/json"
	"fmt"

	"github.com/kvgen/kvgen/examples/scheduler/plugin"
)

// Filter keeps the pods with at most Threshold queued requests.
type Filter struct {
	name      string
	Threshold int `json:"threshold"`
}

// New makes a low-queue filter: {"threshold": 128} (the default).
func New(name string, params json.RawMessage) (plugin.Plugin, error) {
	f := &Filter{name: name, Threshold: 128}
	if err := plugin.Params(name, params, f); err != nil {
		return nil, err
	}
	if f.Threshold < 0 {
		return nil, fmt.Errorf("plugin %q: threshold %d is negative", name, f.Threshold)
	}
	return f, nil
}

// Name is the instance's name.
func (f *Filter) Name() string { return f.name }

// Filter keeps the pods at or under the threshold.
func (f *Filter) Filter(_ plugin.Request, pods []plugin.Pod) []plugin.Pod {
	var kept []plugin.Pod
	for _, p := range pods {
		if p.QueueDepth <= f.Threshold {
			kept = append(kept, p)
		}
	}
	return kept
}
