package pipeline

import (
	"os/exec"
	"path/filepath"
	"slices"

	"github.com/rogpeppe/go-internal/diff"
)

// The names a diff gives the old side of a registry file: what is on
// disk, the file as its git checkout committed it, or no file at all.
const (
	sideOnDisk    = "(on disk)"
	sideCommitted = "(committed)"
	sideMissing   = "(missing)"
)

// unifiedDiff is the diff of the file at path from old, the side named
// oldSide, to new.
func unifiedDiff(path, oldSide string, old, new []byte) []byte {
	return diff.Diff(path+" "+oldSide, old, path+" (generated)", new)
}

// committed reports whether git, run with env, says that the file at abs
// is in its checkout's HEAD and unchanged, in the index and on disk: git
// status then says nothing of it, where it names a file that is changed,
// staged, untracked or ignored. Outside a checkout, or without git, it is
// false. git runs without the file-system monitor a checkout's
// configuration may name, which would run a program of the checkout's,
// and without taking the index lock.
func committed(abs string, env []string) bool {
	cmd := exec.Command("git", "-c", "core.fsmonitor=false", "status", "--porcelain", "--ignored", "--", filepath.Base(abs))
	cmd.Dir = filepath.Dir(abs)
	cmd.Env = append(slices.Clip(env), "GIT_OPTIONAL_LOCKS=0")
	out, err := cmd.Output()
	return err == nil && len(out) == 0
}
