package gocmd

import (
	"bytes"
	"context"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Error is a go command run that failed: what it printed on its standard
// error, and how it ended.
type Error struct {
	// Args are the go command's arguments.
	Args []string
	// Stderr is what it printed there.
	Stderr string
	// Err is how it ended: an *exec.ExitError, or the context's cause
	// when the run was stopped.
	Err error
}

// Error is the go command's own words, on one line, without its "go: "
// prefixes: "go get: module example.com/x: not found; ...".
func (e *Error) Error() string {
	var lines []string
	for _, l := range strings.Split(e.Stderr, "\n") {
		if l = strings.TrimPrefix(strings.TrimSpace(l), "go: "); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		lines = append(lines, e.Err.Error())
	}
	name := "go"
	if len(e.Args) > 0 {
		name += " " + e.Args[0]
	}
	return name + ": " + strings.Join(lines, "; ")
}

// Unwrap returns how the run ended.
func (e *Error) Unwrap() error { return e.Err }

// Run runs the go command with args in dir with the environment env, as
// Command does, and returns what it printed, once CheckModuleFiles finds
// nothing wrong. When it fails the error is an
// *Error holding its standard error, or, when ctx ended, the context's
// cause.
func Run(ctx context.Context, dir string, env []string, args ...string) (stdout, stderr []byte, err error) {
	if err := CheckModuleFiles(dir, env); err != nil {
		return nil, nil, err
	}
	cmd := Command(ctx, args...)
	cmd.Dir, cmd.Env = dir, env
	if dir != "" && env != nil && runtime.GOOS != "windows" && runtime.GOOS != "plan9" {
		// PWD names the working directory as given, symbolic links and
		// all, as os/exec sets it only for a nil environment: with the
		// parent's PWD the go command would see another directory, and
		// paths it reports (an overlay's, GOMOD) would not match dir.
		if abs, err := filepath.Abs(dir); err == nil {
			cmd.Env = append(slices.Clip(env), "PWD="+abs)
		}
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = context.Cause(ctx)
		}
		return out.Bytes(), errOut.Bytes(), &Error{Args: args, Stderr: HideModFile(errOut.String(), dir, args), Err: err}
	}
	return out.Bytes(), errOut.Bytes(), nil
}

// HideModFile returns msg, the go command's words when run in dir with
// args, with the -modfile go.mod among args, and the go.sum beside it,
// named as what they stand for, "go.mod" and "go.sum", whether the go
// command wrote their paths in full or relative to dir: kvgen's scratch
// copies, which are gone once it stops, are nothing a user can open.
func HideModFile(msg, dir string, args []string) string {
	for _, a := range args {
		file, ok := strings.CutPrefix(a, "-modfile=")
		if !ok || file == "" {
			continue
		}
		names := []string{file}
		if abs, err := filepath.Abs(dir); err == nil {
			if rel, err := filepath.Rel(abs, file); err == nil {
				names = append(names, rel)
			}
		}
		for _, name := range names {
			sum := strings.TrimSuffix(name, ".mod") + ".sum"
			msg = strings.ReplaceAll(msg, sum, "go.sum")
			msg = strings.ReplaceAll(msg, name, "go.mod")
		}
	}
	return msg
}
