// Package diag holds kvgen's positioned errors: every problem kvgen reports
// points at a place in a manifest or in Go source, and a run finds all of
// them and shows them sorted by position, the first problemcap.Max of them.
//
// An Error is a value: its position, its message, the error underneath it
// and the other places it concerns (where a duplicate was first given,
// where a constructor is declared) are fields, so that tools can read them
// (see Error.MarshalJSON) while people read the text.
package diag

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kvgen/kvgen/internal/problemcap"
)

// Error is a problem at a position. Pos.Filename is the file as the user
// named it, so messages read like the compiler's: file:line:col: message.
type Error struct {
	Pos token.Position
	// Msg is the message, without the position.
	Msg string
	// Err is the error underneath, if any: what Unwrap returns.
	Err error
	// Related are the other places the problem concerns, in the order the
	// message names them.
	Related []Related
	// Quoted are another tool's errors the problem stands for, each at
	// its own position, such as the compiler's in a connector's package:
	// a List prints each on a line of its own after the problem's, as
	// that tool did, and JSON lists them after Related.
	Quoted []Related
}

// Related is another place a problem concerns.
type Related struct {
	Pos token.Position
	// Msg says what is there, e.g. "first given here".
	Msg string
}

// At returns a related position. Given to Errorf or List.Add as an
// argument, it prints as its position, and the Error records it in Related.
func At(pos token.Position, msg string) Related { return Related{Pos: pos, Msg: msg} }

// String returns the position, as messages show it.
func (r Related) String() string { return r.Pos.String() }

// Errorf returns an *Error at pos. As with fmt.Errorf, a %w verb makes its
// operand the underlying error; Related arguments are recorded.
func Errorf(pos token.Position, format string, args ...any) *Error {
	e := &Error{Pos: pos}
	for _, a := range args {
		if r, ok := a.(Related); ok {
			e.Related = append(e.Related, r)
		}
	}
	err := fmt.Errorf(format, args...)
	e.Msg = err.Error()
	switch w := err.(type) {
	case interface{ Unwrap() error }:
		e.Err = w.Unwrap()
	case interface{ Unwrap() []error }:
		e.Err = errors.Join(w.Unwrap()...)
	}
	return e
}

// Error prints the error as the compiler does: file:line:col: message,
// with the related positions in the message's words. It is always one line
// of printable text: see [OneLine].
func (e *Error) Error() string {
	if !e.Pos.IsValid() && e.Pos.Filename == "" {
		return OneLine(e.Msg)
	}
	return OneLine(e.Pos.String() + ": " + e.Msg)
}

// OneLine returns s with every byte that is not printable text escaped as
// in a Go string literal: a newline as \n, an escape as \x1b, U+202E as
// \u202e, invalid UTF-8 as \xff. Messages quote what the user gave them,
// but some repeat text from elsewhere (the go command, a YAML parser); this
// is the last defence, so that no message can forge a second line, move
// the cursor or reorder what a terminal shows.
func OneLine(s string) string {
	i := strings.IndexFunc(s, func(r rune) bool { return r == utf8.RuneError || !strconv.IsPrint(r) })
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for s = s[i:]; s != ""; {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case strconv.IsPrint(r):
			b.WriteString(s[:size])
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[size:]
	}
	return b.String()
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Prefix returns a copy of e whose message starts with prefix and ": ",
// such as the label of the entry the problem is in.
func (e *Error) Prefix(prefix string) *Error {
	c := *e
	c.Msg = prefix + ": " + e.Msg
	return &c
}

// position is a position as JSON shows it; zero fields are left out.
type position struct {
	File   string `json:"file,omitempty"`
	Line   int    `json:"line,omitempty"`
	Column int    `json:"column,omitempty"`
}

func jsonPos(p token.Position) position {
	return position{File: p.Filename, Line: p.Line, Column: p.Column}
}

// MarshalJSON encodes e for tools, in the spirit of go vet -json:
// {"file", "line", "column", "message", "related": [{"file", "line",
// "column", "message"}]}. The message holds no position of its own, and is
// one line of printable text as Error's is.
func (e *Error) MarshalJSON() ([]byte, error) {
	type related struct {
		position
		Message string `json:"message"`
	}
	v := struct {
		position
		Message string    `json:"message"`
		Related []related `json:"related,omitempty"`
	}{position: jsonPos(e.Pos), Message: OneLine(e.Msg)}
	for _, r := range slices.Concat(e.Related, e.Quoted) {
		v.Related = append(v.Related, related{jsonPos(r.Pos), OneLine(r.Msg)})
	}
	return json.Marshal(v)
}

// List collects the errors of a run. The zero List is ready to use.
type List []*Error

// Add appends an error at pos, as Errorf makes it.
func (l *List) Add(pos token.Position, format string, args ...any) {
	*l = append(*l, Errorf(pos, format, args...))
}

// Append adds err. A List or an *Error inside err keeps its own positions,
// the parts of a joined error (errors.Join) are added each on its own, and
// anything else is placed at pos; either way errors.Is and errors.As still
// find err through the list.
func (l *List) Append(pos token.Position, err error) {
	if err == nil {
		return
	}
	if parts, ok := joined(err); ok {
		for _, part := range parts {
			l.Append(pos, part)
		}
		return
	}
	list, e := find(err)
	switch {
	case list != nil:
		_, direct := err.(List)
		for _, e := range list {
			if !direct {
				e = e.within(err)
			}
			*l = append(*l, e)
		}
	case e != nil:
		if err != error(e) {
			e = e.within(err)
		}
		*l = append(*l, e)
	default:
		*l = append(*l, &Error{Pos: pos, Msg: err.Error(), Err: err})
	}
}

// joined returns the parts of an error that errors.Join or fmt.Errorf
// with several %w made; a List is not one.
func joined(err error) ([]error, bool) {
	if _, isList := err.(List); isList {
		return nil, false
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return nil, false
	}
	return j.Unwrap(), true
}

// find returns the first List or *Error in err's chain.
func find(err error) (List, *Error) {
	for err != nil {
		switch x := err.(type) {
		case List:
			return x, nil
		case *Error:
			return nil, x
		}
		if parts, ok := joined(err); ok {
			for _, p := range parts {
				if l, e := find(p); l != nil || e != nil {
					return l, e
				}
			}
			return nil, nil
		}
		err = errors.Unwrap(err)
	}
	return nil, nil
}

// within returns a copy of e that also unwraps to outer, an error that
// wraps e.
func (e *Error) within(outer error) *Error {
	c := *e
	c.Err = outer
	if e.Err != nil {
		c.Err = errors.Join(e.Err, outer)
	}
	return &c
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

// more stands for the n problems of a list past problemcap.Max, the one
// cap kvgen and its runtime share: a manifest of 50,000 unknown keys is a
// mistake to fix at its first lines, not 5 MB of output.
func more(n int) *Error { return &Error{Msg: problemcap.More(n)} }

// Error prints one error per line, each followed by what it quotes a line
// each: the first problemcap.Max of them, then a line saying how many more
// there are.
func (l List) Error() string {
	var b strings.Builder
	for i, e := range limit(l) {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
		for _, q := range e.Quoted {
			b.WriteByte('\n')
			b.WriteString((&Error{Pos: q.Pos, Msg: q.Msg}).Error())
		}
	}
	return b.String()
}

// limit returns the first problemcap.Max of errs, and an Error without a
// position saying how many more there are, if there are more.
func limit(errs []*Error) []*Error {
	if len(errs) <= problemcap.Max {
		return errs
	}
	return append(slices.Clip(errs[:problemcap.Max]), more(len(errs)-problemcap.Max))
}

// Unwrap returns the errors of the list.
func (l List) Unwrap() []error {
	errs := make([]error, len(l))
	for i, e := range l {
		errs[i] = e
	}
	return errs
}

// Flatten returns the problems err holds, one Error each: the errors of a
// List, the parts of a joined error (errors.Join) each flattened, an
// *Error inside a wrapper, or err itself as an Error without a position.
// As List.Error prints them, there are at most problemcap.Max, then an Error
// without a position whose message says how many more there are.
func Flatten(err error) []*Error { return limit(flatten(err)) }

func flatten(err error) []*Error {
	if err == nil {
		return nil
	}
	if parts, ok := joined(err); ok {
		var out []*Error
		for _, p := range parts {
			out = append(out, flatten(p)...)
		}
		return out
	}
	switch list, e := find(err); {
	case list != nil:
		return slices.Clone(list)
	case e != nil:
		return []*Error{e}
	}
	return []*Error{{Msg: err.Error(), Err: err}}
}

// RelativeTo returns a function that shows a path relative to dir when it
// lies below dir, and unchanged otherwise.
func RelativeTo(dir string) func(string) string {
	return func(path string) string {
		if r, err := filepath.Rel(dir, path); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return path
	}
}

// ShortPath returns a function that shows an absolute path as the go
// command shows files in its messages: relative to dir when that is
// shorter and names the same file, else absolute.
func ShortPath(dir string) func(string) string {
	return func(path string) string {
		r, err := filepath.Rel(dir, path)
		if err != nil || len(r) >= len(path) || !sameFile(filepath.Join(dir, r), path) {
			return path
		}
		return r
	}
}

// sameFile reports whether a and b name the same file, or both name none.
func sameFile(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return errors.Is(errA, fs.ErrNotExist) && errors.Is(errB, fs.ErrNotExist)
	}
	return os.SameFile(fa, fb)
}

// FirstDifferentLine is the first line, counting from 1, where the texts
// a and b differ: where a file that should be another's goes wrong.
func FirstDifferentLine(a, b []byte) int {
	line := 1
	for i := 0; i < len(a) && i < len(b) && a[i] == b[i]; i++ {
		if a[i] == '\n' {
			line++
		}
	}
	return line
}
