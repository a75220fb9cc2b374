package diag

import (
	"errors"
	"fmt"
	"go/token"
	"testing"

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
