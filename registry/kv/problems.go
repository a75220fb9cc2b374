package kv

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/problemcap"
)

// MaxProblems is how many problems an error about a transfer config or a
// connector's settings lists, one a line; the rest are counted on a last
// line. Like go/types, which stops at ten, it keeps a hostile input of
// thousands of bad keys from costing thousands of lines.
const MaxProblems = problemcap.Max

// MaxTransferConfigBytes bounds the size of a transfer config, and of a
// connector's settings: a real one is well under 4 KB, and parsing costs
// memory and time in proportion to the size.
const MaxTransferConfigBytes = 1 << 20

// Problems collects the problems found in one input, so that one error
// reports every one of them, up to [MaxProblems], and counts the rest.
// The zero value is ready to use.
type Problems struct {
	errs []error
	more int
}

// Add records err, unless it is nil. Each problem of an error that
// [Problems.Err] returned is added on its own.
func (p *Problems) Add(err error) { p.addIn("", err) }

// addIn is Add with prefix (and ": ") before each problem's message.
func (p *Problems) addIn(prefix string, err error) {
	if err == nil {
		return
	}
	if l, ok := err.(*problemList); ok {
		for _, e := range l.errs {
			p.addIn(prefix, e)
		}
		p.more += l.more
		return
	}
	if p.Full() {
		p.more++
		return
	}
	if prefix != "" {
		err = fmt.Errorf("%s: %w", prefix, err)
	}
	p.errs = append(p.errs, err)
}

// Full reports whether further problems are only counted, so that a caller
// can skip the work of describing them and call [Problems.Skip].
func (p *Problems) Full() bool { return len(p.errs) >= MaxProblems }

// Skip counts a problem without describing it.
func (p *Problems) Skip() { p.more++ }

// Err returns the problems as one error, one a line, ending with "... and
// N more problems" when some were only counted, or nil when there are
// none. errors.Is and errors.As see each problem listed.
func (p *Problems) Err() error {
	if len(p.errs) == 0 {
		return nil
	}
	return &problemList{errs: slices.Clone(p.errs), more: p.more}
}

// problemList is the error Problems.Err returns.
type problemList struct {
	errs []error
	more int
}

func (l *problemList) Error() string {
	var b strings.Builder
	for i, err := range l.errs {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(err.Error())
	}
	if l.more > 0 {
		b.WriteString("\n" + problemcap.More(l.more))
	}
	return b.String()
}

func (l *problemList) Unwrap() []error { return l.errs }
