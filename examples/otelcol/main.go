// Command otelcol lists an OpenTelemetry Collector distribution's
// components, linked by kvgen in place of the Collector Builder's
// components.go: its receivers and exporters are modules nested inside
// the collector's receiver and exporter modules, which the host requires.
package main

//go:generate go tool kvgen -manifest receivers.yaml -manifest exporters.yaml

import (
	"fmt"
	"os"

	"go.opentelemetry.io/collector/component"

	"github.com/kvgen/kvgen/examples/otelcol/exporters"
	"github.com/kvgen/kvgen/examples/otelcol/receivers"
	"github.com/kvgen/kvgen/registry"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] != "components" {
		fmt.Fprintln(os.Stderr, "usage: otelcol components")
		os.Exit(2)
	}
	list("receivers", receivers.Registry.Entries())
	list("exporters", exporters.Registry.Entries())
}

// factory is what a receiver's and an exporter's factories both say.
type factory interface {
	Type() component.Type
	TracesStability() component.StabilityLevel
}

// list prints a kind of component as the Collector's components command
// does: each one's type, module and stability.
func list[F factory](kind string, entries []registry.Plugin[func() F]) {
	fmt.Printf("%s:\n", kind)
	for _, e := range entries {
		f := e.Factory()
		fmt.Printf("  - name: %s\n    module: %s %s\n    stability: %s\n", f.Type(), e.Module, e.Version, f.TracesStability())
	}
}
