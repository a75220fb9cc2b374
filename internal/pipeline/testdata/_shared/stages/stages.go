// Package stages holds constructors of stage.Factory: some return a
// concrete type, which the generated registry adapts and kvgen checks
// against the interfaces of the roles their entries serve.
package stages

import "example.com/kvcase/stage"

// Even keeps even numbers: a stage.Filter.
type Even struct{ name string }

func (e *Even) Name() string    { return e.name }
func (e *Even) Keep(x int) bool { return x%2 == 0 }

// NewEven returns its concrete type.
func NewEven(name string) (*Even, error) { return &Even{name}, nil }

// High scores high numbers high: a stage.Scorer.
type High struct{ name string }

func (h *High) Name() string        { return h.name }
func (h *High) Score(x int) float64 { return float64(x) / 10 }

// NewHigh returns its concrete type.
func NewHigh(name string) (*High, error) { return &High{name}, nil }

// Both filters and scores.
type Both struct {
	Even
	High
}

func (b *Both) Name() string { return b.Even.name }

// NewBoth returns the contract's interface: which roles it serves is only
// known when it runs.
func NewBoth(name string) (stage.Stage, error) {
	return &Both{Even{name}, High{name}}, nil
}

// Named is only a stage.Stage: it serves no role.
type Named struct{ name string }

func (n *Named) Name() string { return n.name }

// NewNamed returns its concrete type, which implements neither role's
// interface.
func NewNamed(name string) (*Named, error) { return &Named{name}, nil }
