// Command regen writes again everything in this repository that is
// generated and committed, from the code that generates it:
//
//   - the API files under api/ (internal/apitext);
//   - the manifest's JSON Schema, docs/connectors.schema.json;
//   - the pipeline's golden files, internal/pipeline/testdata/*/want (its TestGolden, with -update);
//   - the example modules' registries, by go generate in each.
//
// Run it from anywhere inside the repository, after a change to what any
// of them is made from:
//
//	go run ./internal/regen
//
// CI runs it and fails if it changed a file. The scripts' expectations
// (cmd/kvgen's -update) are not among them: they are the tests' own
// statements of what kvgen prints, written and read by hand.
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kvgen/kvgen/internal/apitext"
	"github.com/kvgen/kvgen/internal/atomicfile"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/testenv"
)

// generated are the example modules whose registries go generate writes,
// by directory from the repository's root. examples/otelcol is not among
// them: it needs the Collector's modules from the network.
var generated = []string{"examples/kvserver", "examples/gateway", "examples/scheduler"}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "regen:", err)
		os.Exit(1)
	}
}

func run() error {
	root, err := testenv.Root()
	if err != nil {
		return err
	}
	api, err := apitext.Files(root)
	if err != nil {
		return fmt.Errorf("api/: %w", err)
	}
	if err := apitext.WriteFiles(root, api); err != nil {
		return fmt.Errorf("api/: %w", err)
	}
	if err := atomicfile.Write(filepath.Join(root, "docs", "connectors.schema.json"), manifest.Schema()); err != nil {
		return err
	}
	if err := goCmd(root, "test", "-count=1", "-short", "-run", "^TestGolden$", "./internal/pipeline", "-update"); err != nil {
		return err
	}
	for _, dir := range generated {
		if err := goCmd(filepath.Join(root, dir), "generate", "./..."); err != nil {
			return err
		}
	}
	return nil
}

// goCmd runs the go command in dir, its output to this one's.
func goCmd(dir string, args ...string) error {
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: go %s: %w", dir, strings.Join(args, " "), err)
	}
	return nil
}
