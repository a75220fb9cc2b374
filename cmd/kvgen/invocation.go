package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// invocation returns the command line that runs kvgen, as hints should
// name it. argv is kvgen's own, parent the command line of the process
// that started it, where the system shows it (nil elsewhere).
//
// The go command sets nothing in the environment of a program it runs
// with `go tool` or `go run`; what tells is where the program lives: the
// go command runs it from its build cache, or on a first run from its work
// directory. Its parent is then that go command, whose arguments end with
// kvgen's own: what comes before them is how the user ran kvgen ("go tool
// kvgen", "go run ./cmd/kvgen"). Where the parent cannot be read, the
// documented way, "go tool kvgen", is the best guess.
func invocation(argv, parent []string) string {
	if len(argv) == 0 {
		return "kvgen"
	}
	if !builtByGo(argv[0]) {
		return strings.TrimSuffix(filepath.Base(argv[0]), ".exe")
	}
	args := argv[1:]
	if n := len(parent) - len(args); n >= 2 && isGoCommand(parent[0]) && slices.Equal(parent[n:], args) {
		words := []string{"go"}
		for _, w := range parent[1:n] {
			words = append(words, shellQuote(w))
		}
		return strings.Join(words, " ")
	}
	return "go tool kvgen"
}

var (
	// cachedExe is where the go command's build cache keeps an executable
	// it built for `go tool` or `go run`: GOCACHE/xx/<64 hex digits>-d/NAME.
	cachedExe = regexp.MustCompile(`(^|[/\\])[0-9a-f]{2}[/\\][0-9a-f]{64}-d[/\\][^/\\]+$`)
	// workExe is where a first run finds it: the go command's work
	// directory, $TMPDIR/go-buildNNN/bNNN/exe/NAME.
	workExe = regexp.MustCompile(`(^|[/\\])go-build[0-9]+[/\\]b[0-9]+[/\\]exe[/\\][^/\\]+$`)
)

// builtByGo reports whether the executable at path is one the go command
// built and ran itself.
func builtByGo(path string) bool {
	return cachedExe.MatchString(path) || workExe.MatchString(path)
}

func isGoCommand(arg0 string) bool {
	base := filepath.Base(arg0)
	return base == "go" || base == "go.exe"
}

// parentArgs returns the parent process's command line where the system
// shows it (Linux's /proc), or nil.
func parentArgs() []string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", os.Getppid()))
	if err != nil || len(data) == 0 {
		return nil
	}
	return strings.Split(strings.TrimSuffix(string(data), "\x00"), "\x00")
}

// shellQuote quotes w for a POSIX shell where it needs it.
func shellQuote(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\n'\"\\$`*?[]{}()<>|&;#~!") {
		return w
	}
	return "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
}
