package main

import (
	"context"
	"path/filepath"
	"strings"

	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/suggest"
	"github.com/kvgen/kvgen/internal/templates"
)

// runDoc prints a Markdown table of the manifest's connectors.
func runDoc(ctx context.Context, e *env, args []string) int {
	var g genFlags
	fs := newFlags(e, "doc", "[-manifest FILE] [-tags TAGS]")
	g.register(fs, false)
	if code := noArgs(e, fs, "doc", args); code >= 0 {
		return code
	}
	items, contract, err := resolveListed(ctx, e, g)
	if err != nil {
		g.report(e, err)
		return exitError
	}
	rows := make([]templates.DocRow, len(items))
	for i, l := range items {
		rows[i] = templates.DocRow{
			Name: l.Name, Aliases: strings.Join(l.Aliases, ", "), Roles: strings.Join(l.Roles, ", "),
			Import: l.Import, Constructor: l.Constructor, Module: l.moduleAtVersion(), Summary: l.summary(),
		}
	}
	var factory string
	switch {
	case contract.Interface:
		// Constructors of an interface contract return it.
		factory = "func() " + contract.String()
	case contract.String() != gen.DefaultFactory:
		factory = contract.String()
	}
	out, err := templates.RenderDoc(suggest.Show(filepath.Base(g.manifest)), factory, rows)
	if err != nil {
		e.report(err)
		return exitError
	}
	e.stdout.Write(out)
	return exitOK
}
