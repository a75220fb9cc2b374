// Command kvgen links KV-cache connectors into a Go binary at compile time.
//
// It reads connectors.yaml, checks every entry against its Go package and
// writes one static registry file:
//
//	//go:generate go tool kvgen
//
// Usage:
//
//	kvgen [generate] [-manifest connectors.yaml] [-o FILE] [-tags TAGS] [-mod mod|readonly]
//	kvgen check      [-manifest connectors.yaml] [-o FILE] [-tags TAGS]
//	kvgen build      -manifest FILE -o BINARY [-tags TAGS] [-ldflags FLAGS] [-v] PACKAGE
//	kvgen list       [-manifest connectors.yaml] [-json]
//	kvgen doc        [-manifest connectors.yaml]
//	kvgen new        [-module PATH] [-dir DIR] NAME
//	kvgen schema
//	kvgen version
//
// generate adds to go.mod and go.sum what the manifest's version: and
// replace: name and they lack, as go get would, and says what it changed;
// with -mod=readonly it reports that instead. check exits 0 when the
// generated file is up to date, 1 when it is stale or missing (printing a
// diff) or go.mod lacks what the manifest names, and 2 on any other
// trouble. Other commands exit 1 on errors in their input and 2 on usage
// errors.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/kvgen/kvgen/gen/diag"
)

func main() {
	// A run is short and most of what it allocates, decoded type
	// information, lives until the end: collecting less often saves time
	// and costs little memory.
	debug.SetGCPercent(400)
	ctx, stop := stopOnSignal(context.Background())
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// stoppedError is why a run stopped early: a signal.
type stoppedError struct{ sig os.Signal }

func (e *stoppedError) Error() string { return "stopped by " + e.sig.String() }

// stopOnSignal returns a context that ends when kvgen gets SIGINT or
// SIGTERM, with a *stoppedError as its cause. The commands then stop the go
// commands they started, remove their temporary files and exit non-zero. A
// second signal ends kvgen at once.
func stopOnSignal(parent context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case sig := <-sigs:
			cancel(&stoppedError{sig})
			signal.Stop(sigs)
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel(nil)
	}
}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1 // errors in the input; for check, a stale file
	exitUsage = 2 // bad command line; for check, any trouble
)

// command is one kvgen subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *env, args []string) int
}

// env is what a command may touch: its arguments' streams.
type env struct {
	stdout, stderr io.Writer
	// ctx is the run's context: once a signal has ended it, errors are its
	// consequences, and report says only that kvgen stopped.
	ctx context.Context
}

// errorf prints a message prefixed with "kvgen: ".
func (e *env) errorf(format string, args ...any) {
	fmt.Fprintf(e.stderr, "kvgen: "+format+"\n", args...)
}

// report prints err: positioned errors one per line as the compiler does,
// anything else with the kvgen prefix.
func (e *env) report(err error) {
	var stopped *stoppedError
	if errors.As(context.Cause(e.ctx), &stopped) {
		e.errorf("%v", stopped)
		return
	}
	var d *diag.Error
	var l diag.List
	if errors.As(err, &l) || errors.As(err, &d) && d.Pos.Filename != "" {
		fmt.Fprintln(e.stderr, err)
		return
	}
	e.errorf("%v", err)
}

// commands lists the subcommands; a function, since usage refers to it and
// the commands refer to usage.
func commands() []command {
	return []command{
		{"generate", "write the registry file for a manifest (the default)", runGenerate},
		{"check", "exit 1 if the registry file is stale or missing", runCheck},
		{"build", "build a binary with the connectors of a deployment manifest", runBuild},
		{"list", "list the manifest's connectors as resolved", runList},
		{"doc", "print a Markdown table of the manifest's connectors", runDoc},
		{"new", "scaffold a connector module", runNew},
		{"schema", "print the JSON Schema of the manifest", runSchema},
		{"version", "print kvgen's version", runVersion},
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	e := &env{stdout: stdout, stderr: stderr, ctx: ctx}
	name := "generate"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		usage(stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(ctx, e, args)
		}
	}
	e.errorf("unknown command %q", name)
	usage(stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintf(w, "usage: kvgen [command] [flags]\n\ncommands:\n")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintf(w, "\nRun 'kvgen COMMAND -h' for a command's flags.\n")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(e *env, name, args string) *flag.FlagSet {
	fs := flag.NewFlagSet("kvgen "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "usage: kvgen %s %s\n", name, args)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses flags; it returns the exit code to use when parsing ended
// the command (-h, or a bad flag), else -1.
func parse(fs *flag.FlagSet, args []string) int {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case err != nil:
		return exitUsage
	}
	return -1
}
