package diag

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/token"
	"strings"
	"testing"

	"github.com/kvgen/kvgen/internal/problemcap"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func pos(line, col int) token.Position {
	return token.Position{Filename: "connectors.yaml", Line: line, Column: col}
}

func TestListSortsAndPrintsOnePerLine(t *testing.T) {
	var l List
	l.Add(pos(12, 5), "connector %q: second", "b")
	l.Add(pos(3, 11), "connector %q: first", "a")
	l.Add(pos(12, 5), "connector %q: second", "b") // an exact repeat
	l.Add(pos(12, 3), "connector %q: same line, earlier column", "b")
	err := l.Err()
	require.Error(t, err)
	assert.Equal(t, `connectors.yaml:3:11: connector "a": first
connectors.yaml:12:3: connector "b": same line, earlier column
connectors.yaml:12:5: connector "b": second`, err.Error())
}

func TestEmptyListIsNoError(t *testing.T) {
	var l List
	assert.NoError(t, l.Err())
}

func TestAppendKeepsInnerPositions(t *testing.T) {
	var inner List
	inner.Add(pos(7, 9), "inner")
	var l List
	l.Append(pos(1, 1), fmt.Errorf("wrapped: %w", inner))
	l.Append(pos(2, 1), Errorf(pos(5, 2), "positioned"))
	l.Append(pos(4, 4), errors.New("plain"))
	l.Append(pos(9, 9), nil)
	assert.Equal(t, "connectors.yaml:4:4: plain\nconnectors.yaml:5:2: positioned\nconnectors.yaml:7:9: inner", l.Err().Error())
}

func TestErrorWithoutPosition(t *testing.T) {
	assert.Equal(t, "no position", (&Error{Msg: "no position"}).Error())
}

func TestErrorKeepsCauseAndRelatedPositions(t *testing.T) {
	cause := errors.New("cause")
	first := pos(4, 11)
	e := Errorf(pos(7, 11), "name %q is given twice (first at %s): %w", "a", At(first, "first given here"), cause)
	assert.Equal(t, `connectors.yaml:7:11: name "a" is given twice (first at connectors.yaml:4:11): cause`, e.Error())
	assert.ErrorIs(t, e, cause)
	assert.Equal(t, []Related{{Pos: first, Msg: "first given here"}}, e.Related)

	var l List
	l.Add(pos(1, 1), "declared at %s", At(pos(9, 0), "declared here"))
	require.Len(t, l[0].Related, 1)
	assert.Equal(t, "connectors.yaml:1:1: declared at connectors.yaml:9", l[0].Error())
}

// wrapper stands for an error type that carries a List, such as
// link.LacksError.
type wrapper struct{ List }

func (w *wrapper) Unwrap() error { return w.List }

func TestAppendKeepsWrapping(t *testing.T) {
	var inner List
	inner.Add(pos(7, 9), "inner")
	w := &wrapper{inner}
	plain := errors.New("plain")
	var l List
	l.Append(pos(1, 1), w)
	l.Append(pos(2, 2), plain)
	l.Append(pos(3, 3), fmt.Errorf("context: %w", Errorf(pos(5, 5), "positioned")))
	err := l.Err()
	var got *wrapper
	require.ErrorAs(t, err, &got, "a List inside another error type is still found")
	assert.Same(t, w, got)
	assert.ErrorIs(t, err, plain)
	assert.Equal(t, "connectors.yaml:2:2: plain\nconnectors.yaml:5:5: positioned\nconnectors.yaml:7:9: inner", err.Error())

	// A List unwraps to its errors.
	var list List
	require.ErrorAs(t, err, &list)
	assert.Len(t, list.Unwrap(), 3)
	var first *Error
	require.ErrorAs(t, err, &first)
	assert.Equal(t, "plain", first.Msg)
}

func TestAppendJoinedAddsEachPart(t *testing.T) {
	var l List
	l.Append(pos(1, 1), errors.Join(Errorf(pos(3, 1), "three"), errors.New("loose")))
	assert.Equal(t, "connectors.yaml:1:1: loose\nconnectors.yaml:3:1: three", l.Err().Error())
}

func TestFlatten(t *testing.T) {
	var l List
	l.Add(pos(2, 1), "two")
	l.Add(pos(1, 1), "one")
	loose := errors.New("no position")
	got := Flatten(errors.Join(l.Err(), fmt.Errorf("wrapped: %w", Errorf(pos(8, 1), "eight")), loose))
	var msgs []string
	for _, e := range got {
		msgs = append(msgs, e.Error())
	}
	assert.Equal(t, []string{"connectors.yaml:1:1: one", "connectors.yaml:2:1: two", "connectors.yaml:8:1: eight", "no position"}, msgs)
	assert.ErrorIs(t, got[3], loose)
	assert.Nil(t, Flatten(nil))
}

func TestErrorJSON(t *testing.T) {
	e := Errorf(pos(7, 11), "alias %q is already the name of connector %q at %s", "a", "b", At(pos(4, 11), "first taken here"))
	data, err := json.Marshal(e)
	require.NoError(t, err)
	assert.JSONEq(t, `{"file": "connectors.yaml", "line": 7, "column": 11,
		"message": "alias \"a\" is already the name of connector \"b\" at connectors.yaml:4:11",
		"related": [{"file": "connectors.yaml", "line": 4, "column": 11, "message": "first taken here"}]}`, string(data))

	data, err = json.Marshal(&Error{Msg: "no position"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"message": "no position"}`, string(data))
}

// Whatever a message repeats, it prints as one line of printable text: no
// text can forge another error line, clear the screen or reorder what a
// terminal shows.
func TestErrorIsOneLineOfPrintableText(t *testing.T) {
	var l List
	l.Add(pos(2, 9), "replace ../x\x1b[2J: no go.mod there")
	l.Add(pos(3, 9), "version %s is not valid", "v1\nconnectors.yaml:1:1: forged")
	l.Add(pos(4, 9), "name a\u202egnp.exe\ttab \xff done")
	l.Append(token.Position{Filename: "odd\nname.yaml", Line: 1, Column: 1}, errors.New("go: \r\n\x07bell"))
	err := l.Err()
	require.Error(t, err)
	assert.Equal(t, `connectors.yaml:2:9: replace ../x\x1b[2J: no go.mod there
connectors.yaml:3:9: version v1\nconnectors.yaml:1:1: forged is not valid
connectors.yaml:4:9: name a\u202egnp.exe\ttab \xff done
odd\nname.yaml:1:1: go: \r\n\abell`, err.Error())
	assert.Equal(t, `ünïcödé “quotes” and € stay`, OneLine(`ünïcödé “quotes” and € stay`))
	assert.Equal(t, `already "quoted\x1b" text is left`, OneLine(`already "quoted\x1b" text is left`))

	data, jerr := json.Marshal(Errorf(pos(1, 1), "x\x1b[2Jy\nz %s", At(pos(2, 2), "here\u202e")))
	require.NoError(t, jerr)
	assert.JSONEq(t, `{"file": "connectors.yaml", "line": 1, "column": 1,
		"message": "x\\x1b[2Jy\\nz connectors.yaml:2:2",
		"related": [{"file": "connectors.yaml", "line": 2, "column": 2, "message": "here\\u202e"}]}`, string(data))
}

// A list shows its first problemcap.Max problems and says how many more there
// are, in text and in what Flatten gives -json; up to problemcap.Max, all.
func TestListShowsTheFirstTenProblems(t *testing.T) {
	list := func(n int) List {
		var l List
		for i := range n {
			l.Add(pos(i+1, 1), "problem %d", i+1)
		}
		return l
	}
	lines := strings.Split(list(50000).Err().Error(), "\n")
	require.Len(t, lines, problemcap.Max+1)
	assert.Equal(t, "connectors.yaml:1:1: problem 1", lines[0])
	assert.Equal(t, "connectors.yaml:10:1: problem 10", lines[9])
	assert.Equal(t, "... and 49990 more problems", lines[10])
	assert.Equal(t, "... and 1 more problem", strings.Split(list(11).Error(), "\n")[10])
	assert.NotContains(t, list(10).Error(), "more")

	flat := Flatten(fmt.Errorf("wrapped: %w", list(25).Err()))
	require.Len(t, flat, problemcap.Max+1)
	assert.Equal(t, "problem 10", flat[9].Msg)
	last, err := json.Marshal(flat[10])
	require.NoError(t, err)
	assert.JSONEq(t, `{"message": "... and 15 more problems"}`, string(last))
	assert.Len(t, Flatten(list(10).Err()), 10)
}

// What a problem quotes from another tool prints after it a line each, in
// that tool's file:line:col form (or its bare words), each line printable
// text of its own; JSON lists the quoted places after the related ones.
func TestQuotedLinesFollowTheirProblem(t *testing.T) {
	src := func(line, col int) token.Position {
		return token.Position{Filename: "conn/conn.go", Line: line, Column: col}
	}
	var l List
	l.Add(pos(9, 3), "connector %q: later", "b")
	e := Errorf(pos(5, 13), "connector %q: package %q does not compile", "a", "example.com/a")
	e.Quoted = []Related{
		{Pos: src(7, 35), Msg: "undefined: kv"},
		{Pos: src(8, 2), Msg: "declared and not used: x\nconnectors.yaml:1:1: forged"},
		{Msg: "too many errors"},
	}
	l = append(l, e)
	err := l.Err()
	assert.Equal(t, `connectors.yaml:5:13: connector "a": package "example.com/a" does not compile
conn/conn.go:7:35: undefined: kv
conn/conn.go:8:2: declared and not used: x\nconnectors.yaml:1:1: forged
too many errors
connectors.yaml:9:3: connector "b": later`, err.Error())
	assert.Len(t, Flatten(err), 2, "quoted lines are no problems of their own")

	data, jerr := json.Marshal(e)
	require.NoError(t, jerr)
	assert.JSONEq(t, `{"file": "connectors.yaml", "line": 5, "column": 13,
		"message": "connector \"a\": package \"example.com/a\" does not compile",
		"related": [
			{"file": "conn/conn.go", "line": 7, "column": 35, "message": "undefined: kv"},
			{"file": "conn/conn.go", "line": 8, "column": 2, "message": "declared and not used: x\\nconnectors.yaml:1:1: forged"},
			{"message": "too many errors"}]}`, string(data))
}

// FirstDifferentLine counts lines from 1 up to the first byte that
// differs, a text that ends early included.
func TestFirstDifferentLine(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"a\nb\nc\n", "a\nb\nc\n", 4},
		{"a\nb\nc\n", "a\nx\nc\n", 2},
		{"a\nb\n", "a\nb\nc\n", 3},
		{"", "a", 1},
	} {
		assert.Equal(t, c.want, FirstDifferentLine([]byte(c.a), []byte(c.b)), "%q %q", c.a, c.b)
	}
}
