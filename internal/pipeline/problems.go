package pipeline

import "github.com/kvgen/kvgen/internal/diag"

// Problem is one problem in the input, as data: its position in a
// manifest or in Go source (Pos), its message without the position (Msg),
// the error underneath (Err), the other places it concerns (Related) and
// the compiler's errors it stands for (Quoted: a connector's package that
// does not compile). Its Error method prints its own line as the compiler
// prints an error, which the error it came from follows with the quoted
// lines, and its MarshalJSON as kvgen -json does, the quoted places with
// the related ones.
type Problem = diag.Error

// Problems returns the problems that an error of Generate, Resolve or
// deploy.Build holds, sorted by position as the error prints them: at most
// ten, then one without a position that says how many more there are. An
// error that is not about the input is one Problem without a position.
func Problems(err error) []*Problem {
	return diag.Flatten(err)
}
