package deploy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/suggest"
)

// Target is a platform to build for, as GOOS and GOARCH name it.
type Target struct {
	GOOS, GOARCH string
}

// String is the target as go tool dist list prints it: GOOS/GOARCH.
func (t Target) String() string { return t.GOOS + "/" + t.GOARCH }

// platformWord is what GOOS and GOARCH values are made of; the go command
// says which pairs it supports.
var platformWord = regexp.MustCompile(`^[a-z0-9]+$`)

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

// ports are the targets the go command builds for, as go tool dist list
// prints them, and the one it builds for by default: the GOOS and GOARCH
// of its environment, else the host's.
type ports struct {
	list []Target // nil until the first target that needs it
	host Target
}

// goPorts asks the go command, in dir with env, which target it builds for
// when none is named, and returns env with GOFLAGS read-only, as
// gocmd.ReadOnlyModules makes it: one go command answers both.
func goPorts(ctx context.Context, dir string, env []string) (ports, []string, error) {
	env, v, err := gocmd.ReadOnlyModulesEnv(ctx, dir, env, "GOOS", "GOARCH")
	if err != nil {
		return ports{}, nil, err
	}
	return ports{host: Target{v[0], v[1]}}, env, nil
}

// load asks go tool dist list, in dir with env, which targets the go
// command builds for, unless each of targets is the platform kvgen runs
// on: the go command, which runs there too, builds for that one.
func (p *ports) load(ctx context.Context, dir string, env []string, targets []Target) error {
	if !slices.ContainsFunc(targets, func(t Target) bool { return t != Target{runtime.GOOS, runtime.GOARCH} }) {
		p.list = []Target{{runtime.GOOS, runtime.GOARCH}}
		return nil
	}
	out, _, err := gocmd.Run(ctx, dir, env, "tool", "dist", "list")
	if err != nil {
		return err
	}
	p.list = nil
	for _, line := range strings.Fields(string(out)) {
		if goos, goarch, ok := strings.Cut(line, "/"); ok {
			p.list = append(p.list, Target{goos, goarch})
		}
	}
	return nil
}

// check says what is wrong with t, which the go command does not build
// for: an unknown GOOS, with the known ones nearest to it, or a GOARCH
// that GOOS has no port for, with those it has.
func (p ports) check(t Target) error {
	if slices.Contains(p.list, t) {
		return nil
	}
	var oses, arches []string
	for _, x := range p.list {
		if !slices.Contains(oses, x.GOOS) {
			oses = append(oses, x.GOOS)
		}
		if x.GOOS == t.GOOS {
			arches = append(arches, x.GOARCH)
		}
	}
	if len(arches) == 0 {
		return fmt.Errorf("unknown GOOS %s; %s (go tool dist list shows every GOOS/GOARCH)", suggest.Quote(t.GOOS), nearest("GOOS", t.GOOS, oses))
	}
	return fmt.Errorf("GOOS %s has no port for GOARCH %s; %s", t.GOOS, suggest.Quote(t.GOARCH), nearest("GOARCH of "+t.GOOS, t.GOARCH, arches))
}

// nearest says which of the valid values are nearest to v, or lists
// them all when none is near.
func nearest(what, v string, valid []string) string {
	if near := suggest.Nearest(v, valid, 3); len(near) > 0 {
		return "the valid " + what + " nearest to it: " + strings.Join(near, ", ")
	}
	return "valid " + what + ": " + strings.Join(valid, ", ")
}

// outputs returns each target's binary, and an error when two targets
// would write the same file: the same path once cleaned and made absolute
// against dir, or paths that symbolic links lead to one file.
func outputs(dir, pattern string, targets []Target) ([]string, error) {
	outs := make([]string, len(targets))
	files := make([]string, len(targets))
	for i, t := range targets {
		outs[i] = t.output(pattern)
		files[i] = resolve(dir, outs[i])
		j := slices.Index(files[:i], files[i])
		if j < 0 {
			j = slices.IndexFunc(outs[:i], func(o string) bool { return sameFile(dir, o, outs[i]) })
		}
		if j >= 0 {
			if targets[j] == t {
				return nil, &OptionError{Field: "Targets", Value: t.String(), Err: errors.New("given twice")}
			}
			return nil, &OptionError{Field: "Binary", Value: pattern, Err: fmt.Errorf("one binary for %s and %s (%s and %s are one file); put {os} and {arch} in it, as in bin/server-{os}-{arch}{exe}", targets[j], t, suggest.Show(outs[j]), suggest.Show(outs[i]))}
		}
	}
	return outs, nil
}

// resolve returns the file path names, made absolute against dir, cleaned,
// and with the symbolic links of its longest existing directory resolved.
func resolve(dir, path string) string {
	if !filepath.IsAbs(path) {
		path = filepath.Join(dir, path)
	}
	path = filepath.Clean(path)
	var rest []string
	for p := path; ; p = filepath.Dir(p) {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		if filepath.Dir(p) == p {
			return path
		}
		rest = append([]string{filepath.Base(p)}, rest...)
	}
}

// sameFile reports whether a and b, relative to dir, are one existing
// file (through hard links, say).
func sameFile(dir, a, b string) bool {
	fa, err := os.Stat(resolve(dir, a))
	if err != nil {
		return false
	}
	fb, err := os.Stat(resolve(dir, b))
	return err == nil && os.SameFile(fa, fb)
}

// Output is the binary Build writes for t, given Options.Binary: the
// pattern with {os}, {arch} and {exe} filled in.
func (t Target) Output(pattern string) string { return t.output(pattern) }

// DefaultTarget is the target Build builds for when Options.Targets is
// empty: GOOS and GOARCH of env, else of the go env file, else the
// host's, as the go command in dir says.
func DefaultTarget(ctx context.Context, dir string, env []string) (Target, error) {
	p, _, err := goPorts(ctx, dir, env)
	return p.host, err
}
