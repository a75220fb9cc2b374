package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/gocmd"
	"github.com/kvgen/kvgen/internal/link"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/pipeline"
	"github.com/kvgen/kvgen/internal/suggest"
)

// genFlags are the flags generate, check and list share.
type genFlags struct {
	manifest, output, tags string
	// manifests are generate's and check's -manifest flags, which may be
	// given more than once.
	manifests manifestList
}

// manifestList is a -manifest flag given once or more.
type manifestList []string

func (l *manifestList) String() string { return strings.Join(*l, " ") }

// Set adds a manifest; one given twice is one registry, generated once.
func (l *manifestList) Set(s string) error {
	if !slices.ContainsFunc(*l, func(m string) bool { return filepath.Clean(m) == filepath.Clean(s) }) {
		*l = append(*l, s)
	}
	return nil
}

// register registers the flags on fs; with several, -manifest may be
// given more than once (generate and check), with -o only once.
func (g *genFlags) register(fs *flag.FlagSet, several bool) {
	if several {
		fs.Var(&g.manifests, "manifest", "the manifest `FILE` to read (default connectors.yaml); give it more than once for several registries in one run")
		fs.StringVar(&g.output, "o", "", "the registry file (default: the manifest's output), with one -manifest")
	} else {
		fs.StringVar(&g.manifest, "manifest", "connectors.yaml", "the manifest to read")
	}
	fs.StringVar(&g.tags, "tags", "", "comma-separated build tags to load the connectors' packages with")
}

// each runs one for every -manifest given (connectors.yaml if none),
// with options whose runs share one package load (pipeline.Together), and
// reports in -json each run's fields under "registries" when there are
// several. It returns the highest exit code of the runs.
func (g *genFlags) each(e *env, fs *flag.FlagSet, base pipeline.Options, one func(opts pipeline.Options) (fields map[string]any, code int)) int {
	if len(g.manifests) == 0 {
		g.manifests = manifestList{"connectors.yaml"}
	}
	if len(g.manifests) > 1 && g.output != "" {
		return usageErrorf(e, fs, "-o names one registry file; give one -manifest with it")
	}
	opts := pipeline.Together(base, g.manifests)
	if len(g.manifests) == 1 {
		g.manifest, opts.Manifest = g.manifests[0], g.manifests[0]
		_, code := one(opts)
		return code
	}
	var reports []map[string]any
	code := exitOK
	for _, m := range g.manifests {
		g.manifest, opts.Manifest = m, m
		fields, c := one(opts)
		fields["manifest"] = m
		// A field not known (the file of a run that stopped before
		// kvgen knew it) is left out, as in a report of one manifest.
		maps.DeleteFunc(fields, func(_ string, v any) bool { return v == nil })
		reports = append(reports, fields)
		code = max(code, c)
	}
	e.json.set("registries", reports)
	return code
}

// command is the command line that writes what check compared.
func (g *genFlags) command() string {
	cmd := self + " -manifest " + suggest.Show(g.manifest)
	if g.output != "" {
		cmd += " -o " + suggest.Show(g.output)
	}
	if g.tags != "" {
		cmd += " -tags " + suggest.Show(g.tags)
	}
	return cmd
}

// report prints err; when it is a go.mod lacking what the manifest names,
// it also names the command that adds it, and returns true.
func (g *genFlags) report(e *env, err error) bool {
	e.report(g.inFlags(err))
	if errors.As(err, new(*link.VendorError)) {
		return true // go mod vendor fixes it, as the error says
	}
	var le *link.LacksError
	if !errors.As(err, &le) {
		return false
	}
	if m, merr := manifest.LoadIn(workDir(), g.manifest); merr == nil && m.Extends.Set {
		// go generate links the base's versions into go.mod, not a
		// deployment's: those are kvgen build's, in a scratch go.mod.
		e.report(problemIn(g.manifest, "go.mod does not satisfy %s, which extends %s: kvgen build links what a deployment manifest names without changing go.mod (%s build -manifest %s -o BINARY PACKAGE)", suggest.Show(g.manifest), suggest.Quote(m.Extends.V), self, suggest.Show(g.manifest)))
		return true
	}
	then := ""
	if le.Vendored {
		then = ", then go mod vendor to record it in vendor/, which the go command builds from"
	}
	e.report(problemIn(g.manifest, "go.mod does not satisfy %s; run go generate (or %s) to add what it lacks%s", suggest.Show(g.manifest), g.command(), then))
	return true
}

// reportVendor reports err, what vendor/ lacks of the entries' packages
// (pipeline.Result.VendorErr). go mod vendor copies them once the registry file
// imports them: while it is stale, generate comes first.
func (g *genFlags) reportVendor(e *env, err error, stale bool) {
	var ve *link.VendorError
	if !stale || !errors.As(err, &ve) || len(ve.Packages) == 0 {
		e.report(err)
		return
	}
	e.report(ve.Packages)
	e.report(problemIn(g.manifest, "vendor/ lacks packages %s names; run go generate (or %s) to write the registry file that imports them, then go mod vendor to record them in vendor/, which the go command builds from", suggest.Show(g.manifest), g.command()))
}

// inFlags words a problem with the file -o names as a problem on -o.
func (g *genFlags) inFlags(err error) error {
	if oe, ok := err.(*pipeline.OutputError); ok {
		return errors.New(oe.In("-o"))
	}
	return err
}

func (g *genFlags) options(e *env) pipeline.Options {
	return pipeline.Options{WorkDir: workDir(), Env: os.Environ(), Manifest: g.manifest, Output: g.output, Tags: splitTags(g.tags), Cache: e.cache}
}

// workDir is the working directory that kvgen's paths are relative to; ""
// if it is gone, which gen and deploy then report.
func workDir() string {
	dir, _ := os.Getwd()
	return dir
}

// splitTags splits a -tags value, comma-separated as go build takes it.
func splitTags(s string) []string {
	var tags []string
	for _, t := range strings.Split(s, ",") {
		if t = strings.TrimSpace(t); t != "" {
			tags = append(tags, t)
		}
	}
	return tags
}

// cacheDir is where kvgen keeps what it found checking constructors:
// $KVGENCACHE, an absolute directory, none if it is "off", else kvgen/ in
// the user's cache directory, if there is one. As the go command does
// with GOCACHE, it refuses a relative KVGENCACHE, which would depend on
// where kvgen runs.
func cacheDir() (string, error) {
	switch v := os.Getenv("KVGENCACHE"); {
	case v == "off":
		return "", nil
	case filepath.IsAbs(v):
		return v, nil
	case v != "":
		return "", fmt.Errorf("KVGENCACHE=%q is not an absolute path; set it to an absolute directory, or to off", v)
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", nil // no cache directory: no cache
	}
	return filepath.Join(dir, "kvgen"), nil
}

func runGenerate(ctx context.Context, e *env, args []string) int {
	var g genFlags
	fs := newFlags(e, "generate", "[-manifest FILE]... [-o FILE] [-tags TAGS] [-mod mod|readonly] [-json]")
	g.register(fs, true)
	e.jsonFlag(fs, "{file, written, modules, problems}, or {registries: [{manifest, file, written, modules}], problems}")
	mod := fs.String("mod", "mod", "mod: add to go.mod and go.sum what the manifest names and they lack; readonly: report it and change nothing")
	if code := noArgs(e, fs, "generate", args); code >= 0 {
		return code
	}
	if len(g.manifests) <= 1 {
		// The registry file once kvgen knows it, whether it was
		// written, and the changes to go.mod and go.sum, which text
		// prints as it goes.
		e.json.set("file", nil)
		e.json.set("written", false)
		e.json.set("modules", []string{})
	}
	opts := g.options(e)
	// An unchanged tree whose packages all come from pinned module
	// versions is not loaded again: the file on disk is what it renders.
	opts.Warm = true
	switch *mod {
	case "mod":
	case "readonly":
		opts.ReadOnlyModules = true
	default:
		e.errorf("-mod=%s: want mod or readonly", *mod)
		return exitUsage
	}
	return g.each(e, fs, opts, func(opts pipeline.Options) (map[string]any, int) {
		r := map[string]any{"file": nil, "written": false, "modules": []string{}}
		code := generateOne(ctx, e, &g, opts, r)
		if len(g.manifests) == 1 {
			for _, k := range []string{"file", "written", "modules"} {
				e.json.set(k, r[k])
			}
		}
		return r, code
	})
}

// generateOne generates the registry of opts.Manifest, setting in r the
// fields of its report.
func generateOne(ctx context.Context, e *env, g *genFlags, opts pipeline.Options, r map[string]any) int {
	// go.mod and go.sum are linked first, again as long as another
	// process changes them meanwhile, and the registry written after.
	res, err := pipeline.Update(ctx, opts)
	if res == nil {
		g.report(e, err)
		// -o naming no Go file is the command line's fault, not the
		// input's; a file there that kvgen may not write is the input's.
		if oe := (*pipeline.OutputError)(nil); errors.As(err, &oe) && oe.Err == nil {
			return exitUsage
		}
		return exitError
	}
	e.warn(res.Warnings)
	r["file"] = res.Path
	if changes := res.ModuleChanges(); e.asJSON && changes != nil {
		r["modules"] = changes
	} else {
		// The go.mod is the output file's module's, which -o may put
		// in another module than the working directory's: then say
		// which.
		goMod, wd := "go.mod", workDir()
		if res.GoModPath() != gocmd.GoModFile(wd) {
			goMod = res.GoModPath()
			if rel, err := filepath.Rel(wd, goMod); err == nil {
				goMod = rel
			}
		}
		for _, c := range changes {
			e.notef("%s: %s", suggest.Show(goMod), c)
		}
	}
	r["written"] = res.Written
	if err != nil {
		// go.mod and go.sum are linked; the registry file is not written.
		e.report(g.inFlags(err))
		return exitError
	}
	// go.mod, go.sum and the registry file are written, as go get
	// writes go.mod and go.sum of a vendored module: go mod vendor
	// then brings vendor/ level with them, and the build works.
	if err := res.VendorErr(); err != nil {
		e.report(err)
		return exitError
	}
	return exitOK
}

func runCheck(ctx context.Context, e *env, args []string) int {
	var g genFlags
	fs := newFlags(e, "check", "[-manifest FILE]... [-o FILE] [-tags TAGS] [-json]")
	g.register(fs, true)
	e.jsonFlag(fs, "{file, problems}, or {registries: [{manifest, file}], problems}")
	if code := noArgs(e, fs, "check", args); code >= 0 {
		return code
	}
	if len(g.manifests) <= 1 {
		e.json.set("file", nil)
	}
	opts := g.options(e)
	opts.ReadOnlyModules = true
	opts.Warm = true // the file on disk is current if it is what an unchanged tree rendered
	return g.each(e, fs, opts, func(opts pipeline.Options) (map[string]any, int) {
		r := map[string]any{"file": nil}
		code := checkOne(ctx, e, &g, opts, r)
		if len(g.manifests) == 1 {
			e.json.set("file", r["file"])
		}
		return r, code
	})
}

// checkOne checks the registry of opts.Manifest, setting in r the fields
// of its report.
func checkOne(ctx context.Context, e *env, g *genFlags, opts pipeline.Options, r map[string]any) int {
	res, err := pipeline.Generate(ctx, opts)
	if err != nil {
		if g.report(e, err) {
			return exitError // like a stale file: generate fixes it
		}
		return exitUsage
	}
	e.warn(res.Warnings)
	r["file"] = res.Path
	diff, err := res.Stale()
	switch {
	case err != nil:
		e.report(err)
		return exitUsage
	case res.VendorErr() != nil:
		g.reportVendor(e, res.VendorErr(), diff != nil)
		return exitError
	case diff == nil:
		return exitOK
	case diff.Missing:
		e.report(problemIn(res.Path, "%s is missing; run go generate (or %s)", suggest.Show(res.Path), g.command()))
		return exitError
	}
	if !e.asJSON {
		e.stdout.Write(diff.Diff)
	}
	e.report(problemAt(token.Position{Filename: res.Path, Line: diff.Line, Column: 1}, "%s is stale; run go generate (or %s)", suggest.Show(res.Path), g.command()))
	return exitError
}

// listed is an entry as `kvgen list -json` reports it.
type listed struct {
	Name        string   `json:"name"`
	Aliases     []string `json:"aliases,omitempty"`
	Import      string   `json:"import"`
	Constructor string   `json:"constructor"`
	Roles       []string `json:"roles,omitempty"` // for a contract that declares roles
	Module      string   `json:"module,omitempty"`
	Version     string   `json:"version,omitempty"`
	Description string   `json:"description,omitempty"`
	Doc         string   `json:"doc,omitempty"`
	Adapted     bool     `json:"adapted,omitempty"`
	Declared    string   `json:"declared"`
}

func toListed(res *pipeline.Result, e *gen.Entry) listed {
	return listed{
		Name: e.Name, Aliases: e.Aliases, Import: e.ImportPath, Constructor: e.Constructor, Roles: res.Contract.RolesOf(e),
		Module: e.Module, Version: e.ModuleVersion, Description: e.Manifest.Description.V, Doc: res.Summary(e),
		Adapted: e.Adapt, Declared: e.Decl.String(),
	}
}

// resolveListed resolves the manifest's entries, with their package docs,
// for list and doc, and says which contract they fit. What go.mod lacks
// (a deployment manifest's modules) is linked as kvgen build links it, in
// a temporary copy: a listing changes nothing.
func resolveListed(ctx context.Context, e *env, g genFlags) ([]listed, *gen.Contract, error) {
	res, err := pipeline.Resolve(ctx, g.options(e))
	if err != nil {
		return nil, nil, err
	}
	e.warn(res.Warnings)
	if changes := res.ModuleChanges(); len(changes) > 0 {
		e.notef("%s names what go.mod lacks; read with a temporary copy of go.mod, as kvgen build links it: %s", g.manifest, strings.Join(changes, ", "))
	}
	items := make([]listed, len(res.Entries))
	for i, en := range res.Entries {
		items[i] = toListed(res, en)
	}
	return items, res.Contract, nil
}

// summary is what listings say of an entry: the manifest's description
// of it, else its constructor's doc summary.
func (l listed) summary() string { return cmp.Or(l.Description, l.Doc) }

// moduleAtVersion is how listings print a module: path@version.
func (l listed) moduleAtVersion() string {
	if l.Version == "" {
		return l.Module
	}
	return l.Module + "@" + l.Version
}

func runList(ctx context.Context, e *env, args []string) int {
	var g genFlags
	fs := newFlags(e, "list", "[-manifest FILE] [-tags TAGS] [-json]")
	g.register(fs, false)
	e.jsonFlag(fs, "{connectors, problems}")
	if code := noArgs(e, fs, "list", args); code >= 0 {
		return code
	}
	e.json.set("connectors", []listed{})
	items, contract, err := resolveListed(ctx, e, g)
	if err != nil {
		g.report(e, err)
		return exitError
	}
	if e.asJSON {
		e.json.set("connectors", items)
		return exitOK
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
	// A roles column for a contract that declares roles.
	roles := func(l listed) string { return strings.Join(l.Roles, ",") + "\t" }
	header := "NAME\tROLES\tCONSTRUCTOR\tMODULE\tSUMMARY"
	if len(contract.Roles) == 0 {
		roles = func(listed) string { return "" }
		header = "NAME\tCONSTRUCTOR\tMODULE\tSUMMARY"
	}
	fmt.Fprintln(tw, header)
	for _, l := range items {
		name := l.Name
		if len(l.Aliases) > 0 {
			name += " (" + strings.Join(l.Aliases, ", ") + ")"
		}
		fmt.Fprintf(tw, "%s\t%s%s.%s\t%s\t%s\n", name, roles(l), l.Import, l.Constructor, l.moduleAtVersion(), l.summary())
	}
	tw.Flush()
	return exitOK
}

func runSchema(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "schema", "")
	if code := noArgs(e, fs, "schema", args); code >= 0 {
		return code
	}
	e.stdout.Write(manifest.Schema())
	return exitOK
}
