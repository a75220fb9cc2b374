package kv

import (
	"errors"
	"fmt"
)

var (
	_ StatsReporter   = (*multiWorker)(nil)
	_ EventReporter   = (*multiWorker)(nil)
	_ RemovalReporter = (*multiWorker)(nil)
)

// KVStats returns each child's stats under its label, as vLLM's
// MultiConnector keys its children's; children that count nothing are
// left out. The MultiConnector counts nothing of its own: every transfer
// is a child's.
func (m *multi) KVStats() Stats {
	var s Stats
	for i, c := range m.children {
		r, ok := c.(StatsReporter)
		if !ok {
			continue
		}
		if s.Children == nil {
			s.Children = make(map[string]Stats, len(m.children))
		}
		s.Children[m.label(i)] = r.KVStats()
	}
	return s
}

// ReportEvents passes emit to every child that reports events: each event
// names its child's medium.
func (m *multi) ReportEvents(emit func(KVEvent)) {
	for _, c := range m.children {
		if r, ok := c.(EventReporter); ok {
			r.ReportEvents(emit)
		}
	}
}

// ReportsRemovals returns nil if every child that reports events reports
// its removals, and otherwise says which do not and why.
func (m *multi) ReportsRemovals() error {
	var errs []error
	for i, c := range m.children {
		if _, ok := c.(EventReporter); !ok {
			continue
		}
		r, ok := c.(RemovalReporter)
		if !ok {
			errs = append(errs, fmt.Errorf("child %s does not say whether it reports removals", Quote(m.label(i))))
			continue
		}
		if err := r.ReportsRemovals(); err != nil {
			errs = append(errs, fmt.Errorf("child %s: %w", Quote(m.label(i)), err))
		}
	}
	return errors.Join(errs...)
}

// label is the i-th child's connector name, with "#2", "#3"... for a name
// listed before it, so that two children of one connector count apart.
func (m *multi) label(i int) string {
	n := 1
	for _, name := range m.names[:i] {
		if name == m.names[i] {
			n++
		}
	}
	if n == 1 {
		return m.names[i]
	}
	return fmt.Sprintf("%s#%d", m.names[i], n)
}
