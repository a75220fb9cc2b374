package main

import (
	"os"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/kvgen/kvgen/internal/kvgentest"
)

// hasRegistry is the [registry] condition: distribution's registry
// program is on PATH (.ci/run installs it), or this is CI, where its
// absence fails the script instead of skipping it.
func hasRegistry() bool {
	_, err := kvgentest.RegistryProgram()
	return err == nil || os.Getenv("CI") == "true"
}

// startRegistry runs `registry`: it starts distribution's registry
// program on a free loopback port, serving plain HTTP, sets $REGISTRY to
// its host:port, and stops it when the script ends.
func startRegistry(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: registry")
	}
	prog, err := kvgentest.RegistryProgram()
	ts.Check(err)
	dir := ts.MkAbs(".registry")
	ts.Check(os.MkdirAll(dir, 0o755))
	reg, err := kvgentest.StartRegistry(prog, dir, kvgentest.RegistryOptions{})
	ts.Check(err)
	ts.Defer(reg.Stop)
	ts.Setenv("REGISTRY", reg.Host)
}
