// Package diag holds kvgen's positioned errors: every problem kvgen reports
// points at a place in a manifest or in Go source, and a run reports all of
// them, sorted by position.
package diag

import (
	"cmp"
	"errors"
	"fmt"
	"go/token"
	"slices"
	"strings"
)

// Error is a problem at a position. Pos.Filename is the file as the user
// named it, so messages read like the compiler's: file:line:col: message.
type Error struct {
	Pos token.Position
	Msg string
}

// Errorf returns an *Error at pos.
func Errorf(pos token.Position, format string, args ...any) *Error {
	return &Error{Pos: pos, Msg: fmt.Sprintf(format, args...)}
}

func (e *Error) Error() string {
	if !e.Pos.IsValid() && e.Pos.Filename == "" {
		return e.Msg
	}
	return e.Pos.String() + ": " + e.Msg
}

// List collects the errors of a run. The zero List is ready to use.
type List []*Error

// Add appends an error at pos.
func (l *List) Add(pos token.Position, format string, args ...any) {
	*l = append(*l, Errorf(pos, format, args...))
}

// Append adds err; a List or an *Error inside err keeps its own positions,
// anything else is placed at pos.
func (l *List) Append(pos token.Position, err error) {
	if err == nil {
		return
	}
	var list List
	if errors.As(err, &list) {
		*l = append(*l, list...)
		return
	}
	var e *Error
	if errors.As(err, &e) {
		*l = append(*l, e)
		return
	}
	*l = append(*l, &Error{Pos: pos, Msg: err.Error()})
}

// Sort orders the errors by file, line and column and drops exact repeats.
func (l List) Sort() List {
	slices.SortStableFunc(l, func(a, b *Error) int {
		return cmp.Or(
			cmp.Compare(a.Pos.Filename, b.Pos.Filename),
			cmp.Compare(a.Pos.Line, b.Pos.Line),
			cmp.Compare(a.Pos.Column, b.Pos.Column),
		)
	})
	return slices.CompactFunc(l, func(a, b *Error) bool { return a.Pos == b.Pos && a.Msg == b.Msg })
}

// Err returns the sorted list as an error, or nil if it is empty.
func (l List) Err() error {
	if len(l) == 0 {
		return nil
	}
	return l.Sort()
}

// Error prints one error per line.
func (l List) Error() string {
	var b strings.Builder
	for i, e := range l {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}
