// Command kvgen links KV-cache connectors, or the plugins of any contract
// a manifest's factory: names, into a Go binary at compile time.
//
// It reads connectors.yaml, checks every entry against its Go package and
// writes one static registry file:
//
//	//go:generate go tool kvgen
//
// Usage:
//
//	kvgen [generate] [-manifest connectors.yaml] [-o FILE] [-tags TAGS] [-mod mod|readonly] [-json]
//	kvgen check      [-manifest connectors.yaml] [-o FILE] [-tags TAGS] [-json]
//	kvgen build      -manifest FILE -o BINARY [-target GOOS/GOARCH,...] [-for CONFIG.json|JSON] [-tags TAGS] [-ldflags FLAGS] [-v] [-json] PACKAGE
//	kvgen build      -manifest FILE -image REF [-o BINARY] [-target linux/ARCH,...|all] [-base REF] [-ca-bundle FILE] [-image-label KEY=VALUE ...] [-insecure] ... PACKAGE
//	kvgen inspect    [-json] [-sbom] [-insecure] BINARY|DIR|IMAGE...
//	kvgen list       [-manifest connectors.yaml] [-tags TAGS] [-json]
//	kvgen doc        [-manifest connectors.yaml] [-tags TAGS]
//	kvgen new        NAME [-module PATH] [-dir DIR] [-replace DIR]
//	kvgen new        NAME -factory IMPORT/PATH.TypeName [-module PATH] [-dir DIR]
//	kvgen schema
//	kvgen version    [-json]
//
// kvgen -h lists the commands, and each command's -h its flags and an
// example. Hints name kvgen "go tool kvgen", as the README runs it.
// Flags may come before the command: kvgen -json list is kvgen list -json;
// with no command after them, they are generate's.
//
// generate adds to go.mod and go.sum what the manifest's version: and
// replace: name and they lack, as go get would, and says what it changed;
// with -mod=readonly it reports that instead. It never writes vendor/: in
// a vendored module it then exits 1 saying to run go mod vendor. check
// exits 0 when the generated file is up to date, 1 when it is stale or
// missing (printing a diff), go.mod lacks what the manifest names, or
// vendor/ what go.mod requires or the entries' packages, and 2 on any
// other trouble. Other commands exit 1 on errors in their input and 2 on
// usage errors (an unknown command or flag, a flag's bad value, arguments
// missing or left over), which print one line and where the usage is.
//
// With -json, generate, check, build, list, inspect and version print on
// stdout one JSON object, the command's report, and nothing else, with the
// same exit status: what the command did (generate: file, written,
// modules; check: file; build: binaries, and image with -image; list:
// connectors; inspect: binaries, or sboms with -sbom; version: version,
// go, revision, dirty), and problems, a list of
// {file, line, column, message, related}, empty when there are none, which
// are then not printed as text. Progress and warnings stay on stderr.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"io"
	"io/fs"
	"log"
	"os"
	"os/signal"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"unicode/utf8"

	"github.com/kvgen/kvgen/internal/deploy"
	"github.com/kvgen/kvgen/internal/diag"
	"github.com/kvgen/kvgen/internal/load"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/pipeline"
	"github.com/kvgen/kvgen/internal/suggest"
)

func main() {
	// A run is short and most of what it allocates, decoded type
	// information, lives until the end: collecting less often saves time
	// and costs little memory. Past 1 GiB the collector works harder
	// again, so that what kvgen must hold (an image's SBOMs, say) does
	// not grow the heap to five times its size.
	debug.SetGCPercent(400)
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(1 << 30) // a user's own limit stands
	}
	// net/http's client writes what a registry sends out of turn to the
	// standard logger, a line in no format of kvgen's and outside a -json
	// report; the exchange's own error says what went wrong.
	log.SetOutput(io.Discard)
	// Signals stay handled until kvgen exits: one that comes once the run
	// is over changes nothing, where with the default action restored it
	// would end kvgen before it could exit with the run's code.
	code := run(stopOnSignal(context.Background()), os.Args[1:], os.Stdout, os.Stderr)
	if code == exitClosedPipe {
		exitOnClosedPipe()
	}
	os.Exit(code)
}

// stoppedError is why a run stopped early: a signal.
type stoppedError struct{ sig os.Signal }

func (e *stoppedError) Error() string { return "stopped by " + e.sig.String() }

// stopSignals are the signals that stop kvgen the clean way: an
// interrupt, a termination and a closed terminal (SIGHUP), each of which
// would otherwise end kvgen at once and leave the go commands it started
// running, and its temporary directories behind. A closed pipe on stdout
// stops it the same way, from the write that finds it (stdoutWriter):
// SIGPIPE itself is ignored, since, once handled, it comes for every
// broken connection too, a registry's among them, which is an error of
// that exchange, not a stop.
var stopSignals = []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP}

// stopOnSignal returns a context that ends when kvgen gets one of
// stopSignals, with a *stoppedError as its cause. The commands then stop
// the go commands they started, remove their temporary files and exit
// non-zero. A second signal ends kvgen at once.
func stopOnSignal(parent context.Context) context.Context {
	ctx, cancel := context.WithCancelCause(parent)
	signal.Ignore(syscall.SIGPIPE)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, stopSignals...)
	go func() {
		sig := <-sigs
		cancel(&stoppedError{sig})
		signal.Stop(sigs)
	}()
	return ctx
}

// self is how hints and usage lines name kvgen: as the README runs it, a
// tool of the module.
const self = "go tool kvgen"

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // errors in the input; for check, a stale file
	exitUsage = 2 // bad command line; for check, any trouble
	// exitClosedPipe is run's answer when stdout's reader went away, as
	// head does once it has what it wants: main then ends kvgen as a
	// closed pipe ends other tools (exitOnClosedPipe), saying nothing.
	exitClosedPipe = -1
)

// stdoutWriter is the command's stdout. Once a write finds its reader
// gone, it stops the run, as a signal does, and writes nothing more: what
// the command still prints is lost, and run ends it quietly.
type stdoutWriter struct {
	w      io.Writer
	stop   context.CancelCauseFunc
	closed atomic.Bool
}

func (s *stdoutWriter) Write(p []byte) (int, error) {
	if s.closed.Load() {
		return 0, errStdoutClosed
	}
	n, err := s.w.Write(p)
	if err != nil && isClosedPipe(err) {
		s.closed.Store(true)
		s.stop(&stoppedError{syscall.SIGPIPE})
	}
	return n, err
}

var errStdoutClosed = errors.New("stdout is closed")

// command is one kvgen subcommand.
type command struct {
	name    string
	summary string
	// example ends the command's -h; %[1]s is how kvgen was invoked.
	example string
	run     func(ctx context.Context, env *env, args []string) int
}

// env is what a command may touch: its output streams, the run's context,
// kvgen's cache of checks and renders, and the report -json prints.
type env struct {
	stdout, stderr io.Writer
	// ctx is the run's context: once a signal has ended it, errors are its
	// consequences, and report says only that.
	ctx context.Context
	// cache is this kvgen's cache of checks and renders, nil for none;
	// run saves it once the command is done, unless a signal stopped it.
	cache *pipeline.Cache
	// asJSON, set by -json, makes report and errorf give their problems to
	// json, the report run prints on stdout once the command is done,
	// instead of printing them.
	asJSON bool
	json   jsonReport
	// stopSaid is whether the report holds that a signal stopped the run.
	stopSaid bool
	// out is stdout, whose reader may go away.
	out *stdoutWriter
	// probing makes parse keep the command's flags in flags and end the
	// command: flagsOf asks a command which flags it has.
	probing bool
	flags   *flag.FlagSet
}

// jsonFlag registers -json, for the commands that print a report; report
// names the report's fields.
func (e *env) jsonFlag(fs *flag.FlagSet, report string) {
	fs.BoolVar(&e.asJSON, "json", false, "print on stdout one JSON object, "+report+", instead of text, for tools; problems are {file, line, column, message, related}")
}

// fileProblem is a problem with a file as a whole, such as a stale
// registry, found by the command rather than returned by gen: printed as a
// "kvgen: " line, its message naming the file, and with -json a problem
// at the file.
type fileProblem struct{ d *diag.Error }

func (p fileProblem) Error() string { return p.d.Msg }
func (p fileProblem) Unwrap() error { return p.d }

// problemIn makes a fileProblem at file.
func problemIn(file, format string, args ...any) error {
	return problemAt(token.Position{Filename: file}, format, args...)
}

// problemAt makes a fileProblem at a place in a file, which -json gives.
func problemAt(pos token.Position, format string, args ...any) error {
	return fileProblem{diag.Errorf(pos, format, args...)}
}

// inFile is err, a problem with the file at path as a whole, as a
// fileProblem there: its message is err's.
func inFile(path string, err error) error {
	if err == nil {
		return nil
	}
	return fileProblem{&diag.Error{Pos: token.Position{Filename: path}, Msg: err.Error(), Err: err}}
}

// errorf reports a problem kvgen words itself, at no position: a message
// prefixed with "kvgen: ", as one line of printable text, or with -json
// a problem of the report that has only that message. Strings from
// outside are shown through suggest.Show where the message names them,
// and whatever else reaches it (an error's text) is escaped by
// diag.OneLine, so no argument, file name or message can end the line or
// drive the terminal.
func (e *env) errorf(format string, args ...any) {
	msg := line(format, args...)
	e.problem("kvgen: "+msg, &diag.Error{Msg: msg})
}

// notef prints a line that is no problem, such as a build's progress, on
// stderr as errorf prints, with or without -json.
func (e *env) notef(format string, args ...any) {
	fmt.Fprintf(e.stderr, "kvgen: %s\n", line(format, args...))
}

// maxLine bounds a message errorf and notef print: text from outside (a
// registry's token realm, in an error from its client, say) can make one
// of megabytes.
const maxLine = 16 << 10

// line is a message as errorf and notef print it, without the prefix.
func line(format string, args ...any) string {
	for i, a := range args {
		if err, ok := a.(error); ok {
			args[i] = message(err)
		}
	}
	msg := diag.OneLine(fmt.Sprintf(format, args...))
	if len(msg) > maxLine {
		n := maxLine
		for n > 0 && !utf8.RuneStart(msg[n]) {
			n--
		}
		msg = msg[:n] + fmt.Sprintf("... (%d bytes)", len(msg))
	}
	return msg
}

// problem reports problems: with -json, it adds them to the report; else
// it prints text, their lines, on stderr.
func (e *env) problem(text string, problems ...error) {
	if e.asJSON {
		e.json.problems = append(e.json.problems, problems...)
		return
	}
	fmt.Fprintln(e.stderr, text)
}

// message is err's text for errorf: the paths of the file-system errors
// in it (a missing -manifest, a package directory, a binary to inspect)
// shown through suggest.Show, as kvgen's own messages show paths.
func message(err error) string {
	msg := err.Error()
	for _, p := range errorPaths(err) {
		if shown := suggest.Show(p); shown != p && p != "" {
			msg = strings.ReplaceAll(msg, p, shown)
		}
	}
	return msg
}

// errorPaths returns the paths of the *fs.PathError and *os.LinkError
// values in err's tree.
func errorPaths(err error) []string {
	var paths []string
	for err != nil {
		switch x := err.(type) {
		case *fs.PathError:
			paths = append(paths, x.Path)
		case *os.LinkError:
			paths = append(paths, x.Old, x.New)
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, part := range j.Unwrap() {
				paths = append(paths, errorPaths(part)...)
			}
			return paths
		}
		err = errors.Unwrap(err)
	}
	return paths
}

// warn prints warnings, one a line as the compiler prints errors, on
// stderr even with -json: they do not change the outcome.
func (e *env) warn(ws []*pipeline.Problem) {
	for _, w := range ws {
		fmt.Fprintln(e.stderr, w)
	}
}

// report reports err: positioned errors one per line as the compiler
// prints them, the parts of a joined error each on their own, anything
// else with the kvgen prefix; with -json, as the report's problems. Once
// a signal has stopped the run, it says only that, once in a report. It
// and errorf are the two ways the command reports a problem.
func (e *env) report(err error) {
	var stopped *stoppedError
	if errors.As(context.Cause(e.ctx), &stopped) {
		if e.out != nil && e.out.closed.Load() {
			return // stdout's reader has gone: the stop is what it asked
		}
		if e.asJSON && e.stopSaid {
			return
		}
		err, e.stopSaid = stopped, true
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if _, isList := err.(diag.List); !isList {
			for _, err := range j.Unwrap() {
				e.report(err)
			}
			return
		}
	}
	var fp fileProblem
	var d *diag.Error
	var l diag.List
	var ge *deploy.GoError
	switch {
	case !e.asJSON && errors.As(err, &ge):
		e.goFailed(err, ge)
	case errors.As(err, &fp):
		// The message as text shows it, with the file's position.
		msg := line("%v", err)
		p := *fp.d
		p.Msg = msg
		e.problem("kvgen: "+msg, &p)
	case errors.As(err, &l) || errors.As(err, &d) && d.Pos.Filename != "":
		e.problem(err.Error(), err)
	case errors.Is(err, load.ErrNoKVGen):
		e.errorf("%v; add it with go get -tool github.com/kvgen/kvgen/cmd/kvgen", err)
	case errors.As(err, new(*manifest.FileError)):
		e.errorf("%v; run kvgen in the directory that holds the manifest, or name it with -manifest", err)
	default:
		e.errorf("%v", err)
	}
}

// maxGoLines and maxGoBytes bound what goFailed shows of a failed go
// command's output: its last lines, where a build's errors are, after
// what -v printed of the packages it compiled.
const (
	maxGoLines = 500
	maxGoBytes = 256 << 10
)

// goFailed reports err, a go command run that failed (ge), as the go
// command reported it: kvgen's line, then the go command's lines as it
// wrote them, so that a compiler's errors read, and an editor finds their
// positions, as after go build. Escaped into kvgen's one line, a build's
// errors were unreadable. Each line is printable text but for its tabs
// (line), and one that begins as kvgen's own do (a //line directive in
// a dependency can make a compiler's) is marked as the go command's.
func (e *env) goFailed(err error, ge *deploy.GoError) {
	full, own := err.Error(), ge.Error()
	head := fmt.Sprintf("go %s: %v", ge.Verb, ge.Err)
	if i := strings.Index(full, own); i >= 0 {
		head = full[:i] + head + full[i+len(own):]
	}
	var lines []string
	size := 0
	all := strings.Split(strings.TrimRight(ge.Output, "\r\n"), "\n")
	if strings.TrimSpace(ge.Output) == "" {
		all = nil
	}
	for i := len(all) - 1; i >= 0; i-- {
		l := goLine(all[i])
		if len(lines) == maxGoLines || size+len(l) > maxGoBytes {
			lines = append(lines, fmt.Sprintf("... (%d lines before)", i+1))
			break
		}
		lines = append(lines, l)
		size += len(l) + 1
	}
	slices.Reverse(lines)
	e.problem(strings.Join(append([]string{"kvgen: " + line("%s", head)}, lines...), "\n"))
}

// goLine is a line of the go command's output as goFailed shows it.
func goLine(l string) string {
	parts := strings.Split(strings.TrimSuffix(l, "\r"), "\t")
	for i, p := range parts {
		parts[i] = line("%s", p)
	}
	l = strings.Join(parts, "\t")
	if strings.HasPrefix(l, "kvgen") {
		l = "go: " + l
	}
	return l
}

// commands lists the subcommands; a function, since usage refers to it and
// the commands refer to usage.
func commands() []command {
	return []command{
		{"generate", "write the registry file for a manifest (the default)",
			"%[1]s -manifest connectors.yaml\n  //go:generate go tool kvgen", runGenerate},
		{"check", "exit 1 if the registry file is stale or missing",
			"%[1]s check -manifest connectors.yaml", runCheck},
		{"build", "build a binary with the connectors of a deployment manifest",
			"%[1]s build -manifest deploy/edge.yaml -o bin/server-edge ./cmd/server", runBuild},
		{"inspect", "list the connectors a binary or an image links, read from its file",
			"%[1]s inspect -json bin/", runInspect},
		{"list", "list the manifest's connectors as resolved",
			"%[1]s list -json", runList},
		{"doc", "print a Markdown table of the manifest's connectors",
			"%[1]s doc > CONNECTORS.md", runDoc},
		{"new", "scaffold a connector module, or a plugin of any contract",
			"%[1]s new fastkv -module example.com/acme/fastkv", runNew},
		{"schema", "print the JSON Schema of the manifest",
			"%[1]s schema > connectors.schema.json", runSchema},
		{"version", "print kvgen's version",
			"%[1]s version", runVersion},
	}
}

func lookup(name string) (command, bool) {
	for _, c := range commands() {
		if c.name == name {
			return c, true
		}
	}
	return command{}, false
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	out := &stdoutWriter{w: stdout, stop: stop}
	e := &env{stdout: out, stderr: stderr, ctx: ctx, out: out}
	e.json.w = out
	if len(args) > 0 {
		switch args[0] {
		case "help", "-h", "-help", "--help":
			if args[0] == "help" && len(args) > 1 {
				// help COMMAND is COMMAND -h.
				c, ok := lookup(args[1])
				if !ok {
					return e.unknownCommand(args[1])
				}
				return c.run(ctx, e, []string{"-h"})
			}
			usage(e, stdout)
			return exitOK
		case "-version", "--version":
			// As other tools answer it: the version, not generate's flags.
			args = append([]string{"version"}, args[1:]...)
		}
	}
	name, args := commandLine(args)
	c, ok := lookup(name)
	if !ok {
		return e.unknownCommand(name)
	}
	dir, err := cacheDir()
	if err != nil {
		e.errorf("%v", err)
		return exitUsage
	}
	if dir != "" {
		e.cache = pipeline.OpenCache(dir, generatorIdentity())
	}
	code := c.run(ctx, e, args)
	if ctx.Err() == nil {
		e.cache.Save()
	}
	if e.asJSON {
		if err := e.json.end(); err != nil && !out.closed.Load() {
			e.notef("%v", err)
		}
	}
	if out.closed.Load() {
		return exitClosedPipe
	}
	return code
}

// commandLine splits kvgen's arguments into the command's name and its
// arguments. The name comes first, or after flags of that command
// (kvgen -json list is kvgen list -json, the flags going first); flags
// with no command after them are generate's, as in //go:generate go tool
// kvgen -manifest deploy.yaml. A word after flags that is no command but
// near one is taken for a misspelt command, which run then reports.
func commandLine(args []string) (name string, rest []string) {
	if len(args) == 0 {
		return "generate", nil
	}
	if args[0] != "" && args[0][0] != '-' {
		return args[0], args[1:]
	}
	// Which flags take a value is the command's to say: kvgen -o list
	// writes a registry file called list.
	for _, c := range commands() {
		fs := flagsOf(c)
		if fs.Parse(args) == nil && fs.NArg() > 0 && fs.Arg(0) == c.name {
			flags := args[:len(args)-fs.NArg()]
			return c.name, append(slices.Clip(flags), fs.Args()[1:]...)
		}
	}
	if fs := flagsOf(commands()[0]); fs.Parse(args) == nil && fs.NArg() > 0 {
		if word := fs.Arg(0); len(suggest.Nearest(word, commandNames(), 1)) > 0 {
			return word, nil
		}
	}
	return "generate", args
}

// flagsOf returns the flags c defines, without running it: c stops at
// parse, the first thing it does once its flags are defined.
func flagsOf(c command) *flag.FlagSet {
	e := &env{stdout: io.Discard, stderr: io.Discard, ctx: context.Background()}
	e.probing = true
	c.run(e.ctx, e, nil)
	fs := e.flags
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

func commandNames() []string {
	var names []string
	for _, c := range commands() {
		names = append(names, c.name)
	}
	return names
}

// unknownCommand reports a command kvgen does not have, with the commands
// nearest to it, and where the list of commands is.
func (e *env) unknownCommand(name string) int {
	msg := "unknown command " + suggest.Quote(name)
	if near := suggest.Nearest(name, commandNames(), 2); len(near) > 0 {
		msg += "; did you mean " + strings.Join(near, " or ") + "?"
	}
	e.errorf("%s", msg)
	e.usageHint("")
	return exitUsage
}

// usageHint says, after a usage error, where the usage is, as the go
// command does, instead of printing it all: the error stays in sight.
func (e *env) usageHint(command string) {
	fmt.Fprintf(e.stderr, "run '%s -h' for usage\n", strings.TrimSpace(self+" "+command))
}

func usage(e *env, w io.Writer) {
	fmt.Fprintf(w, "kvgen links KV-cache connectors into a Go binary at compile time.\n\n")
	fmt.Fprintf(w, "usage: %s [command] [flags]\n\ncommands:\n", self)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nWithout a command, kvgen runs generate, as in\n\n\t//go:generate go tool kvgen\n")
	fmt.Fprintf(w, "\nRun '%s COMMAND -h' for a command's flags and an example.\n", self)
}

// newFlags returns a flag set that reports errors instead of exiting, and
// whose -h ends with the command's example.
func newFlags(e *env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet("kvgen "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: %s %s %s\n", self, name, args)
		fs.PrintDefaults()
		if c, ok := lookup(name); ok {
			fmt.Fprintf(e.stderr, "\nexample:\n  %s\n", fmt.Sprintf(c.example, self))
		}
	}
	return fs
}

// parse parses flags; it returns the exit code to use when parsing ended
// the command (-h, or a bad flag), else -1. The flag package prints a bad
// flag's name as it is, so parse reports the error itself, escaped as
// errorf escapes (a problem of the report, if -json came before it), then
// says where the usage is. -h is no run: it prints no report.
func parse(e *env, fs *flag.FlagSet, args []string) int {
	if e.probing {
		e.flags = fs
		return exitOK
	}
	out, usage := fs.Output(), fs.Usage
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	fs.SetOutput(out)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		e.asJSON = false
		usage()
		return exitOK
	case err != nil:
		msg := diag.OneLine(err.Error())
		e.problem(msg, &diag.Error{Msg: msg})
		e.usageHint(commandOf(fs))
		return exitUsage
	}
	return -1
}

// commandOf is the command whose flags fs holds, as newFlags names it.
func commandOf(fs *flag.FlagSet) string {
	return strings.TrimPrefix(fs.Name(), "kvgen ")
}

// usageErrorf reports a usage error of the command whose flags fs
// holds, other than a bad flag: the problem, and where the usage is.
func usageErrorf(e *env, fs *flag.FlagSet, format string, args ...any) int {
	e.errorf(format, args...)
	e.usageHint(commandOf(fs))
	return exitUsage
}

// noArgs parses the flags of a command that takes no arguments; it
// returns the exit code to use when that ended the command, else -1.
func noArgs(e *env, fs *flag.FlagSet, name string, args []string) int {
	if code := parse(e, fs, args); code >= 0 {
		return code
	}
	if fs.NArg() > 0 {
		return usageErrorf(e, fs, "%s takes no arguments, got %q", name, fs.Args())
	}
	return -1
}

// parseMixed parses flags that come before, between or after the
// positional arguments, as the go command accepts them, and returns the
// positional arguments. A "--" ends the flags. code is as parse returns it.
func parseMixed(e *env, fs *flag.FlagSet, args []string) (positional []string, code int) {
	for {
		if code := parse(e, fs, args); code >= 0 {
			return nil, code
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, -1
		}
		if used := args[:len(args)-len(rest)]; len(used) > 0 && used[len(used)-1] == "--" {
			return append(positional, rest...), -1
		}
		positional, args = append(positional, rest[0]), rest[1:]
	}
}
