package deploy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// Target is a platform to build for, as GOOS and GOARCH name it.
type Target struct {
	GOOS, GOARCH string
}

// String is the target as go tool dist list prints it: GOOS/GOARCH.
func (t Target) String() string { return t.GOOS + "/" + t.GOARCH }

// platformWord is what GOOS and GOARCH values are made of; the go command
// says which pairs it supports.
var platformWord = regexp.MustCompile(`^[a-z][a-z0-9]*$`)

// ParseTarget parses GOOS/GOARCH, such as linux/arm64.
func ParseTarget(s string) (Target, error) {
	goos, goarch, ok := strings.Cut(s, "/")
	if !ok || !platformWord.MatchString(goos) || !platformWord.MatchString(goarch) {
		return Target{}, fmt.Errorf("%q is not a target: want GOOS/GOARCH, such as linux/amd64 or darwin/arm64 (go tool dist list shows them all)", s)
	}
	return Target{goos, goarch}, nil
}

// env is env with the target's GOOS and GOARCH; the zero target leaves
// env as it is, so that GOOS and GOARCH there hold.
func (t Target) env(env []string) []string {
	if t == (Target{}) {
		return env
	}
	return append(slices.Clip(env), "GOOS="+t.GOOS, "GOARCH="+t.GOARCH)
}

// output is the binary path pattern with {os}, {arch} and {exe} (.exe on
// Windows, else nothing) filled in for the target.
func (t Target) output(pattern string) string {
	exe := ""
	if t.GOOS == "windows" {
		exe = ".exe"
	}
	return strings.NewReplacer("{os}", t.GOOS, "{arch}", t.GOARCH, "{exe}", exe).Replace(pattern)
}

// outputs returns each target's binary, and an error when two targets
// would write the same one.
func outputs(pattern string, targets []Target) ([]string, error) {
	outs := make([]string, len(targets))
	for i, t := range targets {
		outs[i] = t.output(pattern)
		if j := slices.Index(outs[:i], outs[i]); j >= 0 {
			if targets[j] == t {
				return nil, &OptionError{Field: "Targets", Value: t.String(), Err: errors.New("given twice")}
			}
			return nil, &OptionError{Field: "Binary", Value: pattern, Err: fmt.Errorf("one binary for %s and %s; put {os} and {arch} in it, as in bin/server-{os}-{arch}{exe}", targets[j], t)}
		}
	}
	return outs, nil
}
