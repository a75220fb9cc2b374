// Command driver is a build driver that runs kvgen without go generate, as
// a build system would: it generates a module's registry, checks that it
// is current, and builds the deployment, reading each step's -json report
// and stopping at the first step that fails.
//
//	driver [-C DIR] [-manifest connectors.yaml] -o BINARY [PACKAGE]
//
// kvgen's interface for programs is its command line: the -json reports
// and exit statuses of docs/commands.md, which the driver reads. Its Go
// packages are internal, as the OpenTelemetry Collector Builder's and
// sqlc's are, so that they can change without breaking a caller. The
// driver runs kvgen as the module's go tool (`go tool kvgen`); -kvgen
// names another command, such as an installed kvgen binary.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

func main() {
	dir := flag.String("C", ".", "the module's `directory`, where kvgen runs")
	manifest := flag.String("manifest", "connectors.yaml", "the manifest, relative to -C")
	binary := flag.String("o", "", "the binary to build, relative to -C (required)")
	kvgen := flag.String("kvgen", "go tool kvgen", "the kvgen `command`, split at spaces")
	flag.Parse()
	pkg := "."
	switch flag.NArg() {
	case 0:
	case 1:
		pkg = flag.Arg(0)
	default:
		fail(errors.New("at most one package to build"))
	}
	if *binary == "" {
		fail(errors.New("-o is required"))
	}
	k := kvgenCmd{dir: *dir, argv: strings.Fields(*kvgen)}
	steps := []struct {
		name string
		args []string
		say  func(report) string
	}{
		{"generate", []string{"generate", "-manifest", *manifest}, generated},
		{"check", []string{"check", "-manifest", *manifest}, func(r report) string { return r.File + " is current" }},
		{"build", []string{"build", "-manifest", *manifest, "-o", *binary, pkg}, built},
	}
	for _, s := range steps {
		r, err := k.run(s.args...)
		if err != nil {
			fail(fmt.Errorf("%s: %w", s.name, err))
		}
		fmt.Printf("%s: %s\n", s.name, s.say(r))
	}
}

// report is what the driver reads of kvgen's -json reports: the fields of
// generate, check and build, and the problems every command reports.
type report struct {
	File     string    `json:"file"`
	Written  bool      `json:"written"`
	Modules  []string  `json:"modules"`
	Binaries []binary  `json:"binaries"`
	Problems []problem `json:"problems"`
}

type binary struct {
	Path   string `json:"path"`
	Target string `json:"target"`
}

type problem struct {
	File    string `json:"file"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
}

func (p problem) String() string {
	switch {
	case p.File == "":
		return p.Message
	case p.Line == 0:
		return p.File + ": " + p.Message
	case p.Column == 0:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
	}
	return fmt.Sprintf("%s:%d:%d: %s", p.File, p.Line, p.Column, p.Message)
}

func generated(r report) string {
	s := r.File + " unchanged"
	if r.Written {
		s = r.File + " written"
	}
	for _, m := range r.Modules {
		s += "; " + m
	}
	return s
}

func built(r report) string {
	var s []string
	for _, b := range r.Binaries {
		s = append(s, b.Path+" ("+b.Target+")")
	}
	return strings.Join(s, ", ")
}

// kvgenCmd runs kvgen in a module.
type kvgenCmd struct {
	dir  string
	argv []string
}

// run runs kvgen -json with args and returns its report. A report with
// problems is an error that lists them, one per line; an exit status other
// than 0 without problems is an error too. kvgen's stderr (progress,
// warnings) goes to the driver's.
func (k kvgenCmd) run(args ...string) (report, error) {
	if len(k.argv) == 0 {
		return report{}, errors.New("-kvgen names no command")
	}
	argv := append(append(k.argv[1:len(k.argv):len(k.argv)], "-json"), args...)
	cmd := exec.Command(k.argv[0], argv...)
	cmd.Dir = k.dir
	cmd.Stderr = os.Stderr
	out, runErr := cmd.Output()
	var r report
	if err := json.NewDecoder(bytes.NewReader(out)).Decode(&r); err != nil {
		return r, errors.Join(runErr, fmt.Errorf("reading its report: %w", err))
	}
	if len(r.Problems) == 0 {
		return r, runErr
	}
	lines := make([]string, len(r.Problems))
	for i, p := range r.Problems {
		lines[i] = p.String()
	}
	return r, errors.New(strings.Join(lines, "\n"))
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "driver:", err)
	os.Exit(1)
}
