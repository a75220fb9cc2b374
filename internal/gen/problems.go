package gen

import "github.com/kvgen/kvgen/internal/diag"

// Problem is one problem in the input, as data: its position in a
// manifest or in Go source (Pos), its message without the position (Msg),
// the error underneath (Err) and the other places it concerns (Related).
// Its Error method prints it as the compiler prints an error, and its
// MarshalJSON as kvgen -json does.
type Problem = diag.Error

// Problems returns the problems that an error of Generate, Resolve or
// deploy.Build holds, sorted by position as the error prints them: at most
// ten, then one without a position that says how many more there are. An
// error that is not about the input is one Problem without a position.
func Problems(err error) []*Problem {
	return diag.Flatten(err)
}
