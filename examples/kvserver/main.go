// Command kvserver is an example host for kvgen-linked connectors: it selects
// its KV connector from a vLLM-style --kv-transfer-config, and plays the two
// sides of a disaggregated prefill/decode handoff. KV bytes derived from the
// tokens and the layer stand in for a model's attention KV.
//
//	kvserver -list-connectors [-json]
//	kvserver [-kv-transfer-config JSON] [-kv-events-config JSON] [-model NAME] [-prompt TEXT] [-tokens N] [-json] [-v] [demo|prefill|decode]
//	kvserver [-kv-transfer-config JSON] [-kv-events-config JSON] [-model NAME] [-listen ADDR] serve
//
// prefill computes the prompt's KV and saves it through the worker side;
// as in vLLM, the last prompt token is always computed, so prefill saves the
// full blocks before it, which is what decode can load;
// decode asks the scheduler side how many tokens it can load, loads them
// through the worker side, verifies every byte against recomputation and
// reports how many tokens it loaded and how many it recomputed; demo does
// both in one process.
//
// serve is a long-running process: POST /prefill and POST /decode run a
// step for the prompt their JSON body names ({"prompt": ..., "tokens": N}),
// /metrics exports the connector's stats in Prometheus' text format,
// /events streams its KV events as JSON lines, /healthz answers ok, and
// SIGTERM stops it once the requests in flight are answered. Flags bound
// the connections, the requests and prompt tokens in flight (503 with
// Retry-After past them), the time each read and write may take, and how
// far an /events follower may fall behind; -h lists them with their
// defaults.
//
// In every mode, -kv-events-config (vLLM's --kv-events-config JSON)
// publishes the KV events the connector reports on ZeroMQ as vLLM does,
// encoded as -kv-events-encoding says (maps or arrays); serve's /metrics
// then counts them.
package main

//go:generate go tool kvgen -manifest ../../connectors.yaml

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/kvgen/kvgen/examples/external/kvevents"
	"github.com/kvgen/kvgen/registry/kv"
)

func main() {
	os.Exit(run(context.Background(), Registry, os.Args[1:], os.Stdout, os.Stderr))
}

// run is kvserver with the registry it links: the generated one, or in
// tests one built for the case.
func run(ctx context.Context, linked *kv.Registry, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("kvserver", flag.ContinueOnError)
	fs.SetOutput(stderr)
	list := fs.Bool("list-connectors", false, "list the linked connectors and exit")
	asJSON := fs.Bool("json", false, "print JSON")
	configJSON := fs.String("kv-transfer-config", "", "vLLM-style KV transfer config (JSON); a filesystem connector's max_bytes_per_token defaults to the size of kvserver's KV, 128 bytes a token; default: "+describeDefault(linked))
	model := fs.String("model", "", "the model whose KV this is; connectors keep each model's KV apart")
	prompt := fs.String("prompt", "The quick brown fox jumps over the lazy dog", "the prompt")
	tokens := fs.Int("tokens", 100, "prompt length in tokens, from 1 to -max-prompt-tokens; the prompt's tokens repeat to fill it")
	verbose := fs.Bool("v", false, "log each connector created")
	listen := fs.String("listen", "127.0.0.1:8080", "serve: the address to listen on")
	eventsJSON := fs.String("kv-events-config", "", "vLLM's KV events config (JSON): publish the KV events the connector reports on ZeroMQ, as vLLM does, e.g. '{\"enable_kv_cache_events\":true,\"endpoint\":\"tcp://*:5557\",\"topic\":\"kv@pod-a@model\"}'; the default endpoint is tcp://127.0.0.1:5557; default: no events")
	eventsEncoding := fs.String("kv-events-encoding", "maps", "how -kv-events-config's events are encoded: maps (vLLM's current encoding) or arrays (vLLM's older one, for routers that read only it)")
	lim := defaultLimits
	lim.flags(fs)
	fs.Usage = func() { usage(fs) }
	if err := fs.Parse(args); errors.Is(err, flag.ErrHelp) {
		return 0
	} else if err != nil {
		return 2
	}
	if *list {
		if err := listConnectors(stdout, linked, *asJSON); err != nil {
			fmt.Fprintln(stderr, "kvserver:", err)
			return 1
		}
		return 0
	}
	mode := "demo"
	switch rest := fs.Args(); {
	case len(rest) > 1 && strings.HasPrefix(rest[1], "-"):
		// The flag package stops at the first argument that is not a
		// flag: anything after the mode would be silently ignored.
		fmt.Fprintf(stderr, "kvserver: flag %q after the mode %q: flags go before the mode\n", rest[1], rest[0])
		return 2
	case len(rest) > 1:
		fmt.Fprintf(stderr, "kvserver: one mode at most, got %q\n", rest)
		return 2
	case len(rest) == 1:
		mode = rest[0]
	}
	if !slices.Contains(modeNames(), mode) {
		fmt.Fprintf(stderr, "kvserver: unknown mode %q (want %s)\n", mode, strings.Join(modeNames(), ", "))
		return 2
	}
	if err := lim.check(); err != nil {
		fmt.Fprintln(stderr, "kvserver:", strings.ReplaceAll(err.Error(), "\n", "; "))
		return 2
	}
	if err := lim.checkTokens(*tokens); err != nil {
		fmt.Fprintf(stderr, "kvserver: -tokens %d: %v\n", *tokens, err)
		return 2
	}
	var eventsCfg kvevents.Config
	if *eventsJSON != "" {
		c, err := kvevents.Parse([]byte(*eventsJSON))
		if err != nil {
			fmt.Fprintf(stderr, "kvserver: -kv-events-config: %s\n", strings.TrimPrefix(err.Error(), "kv events config: "))
			return 2
		}
		eventsCfg = c
	}
	encoding, err := kvevents.ParseEncoding(*eventsEncoding)
	if err != nil {
		fmt.Fprintf(stderr, "kvserver: -kv-events-encoding: %v\n", err)
		return 2
	}
	if *configJSON == "" {
		*configJSON = defaultConfig(linked)
	}
	cfg, err := kv.ParseTransferConfig([]byte(*configJSON))
	if err != nil {
		fmt.Fprintln(stderr, "kvserver:", err)
		return 2
	}
	cfg.Model = *model
	boundLayers(linked, cfg.Connector, cfg.Extra)
	if len(cfg.LayerNames) == 0 {
		for i := range 4 {
			cfg.LayerNames = append(cfg.LayerNames, fmt.Sprintf("model.layers.%d.self_attn", i))
		}
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug // the registry records each creation at Debug
	}
	// The connectors log through the registry: slog.Default stays as it is.
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	req := &kv.Request{ID: "req-0", PromptTokens: tokenize(*prompt, *tokens)}
	e := &engine{reg: linked.WithLogger(logger), log: logger, cfg: cfg}
	if eventsCfg.Enabled() {
		// Closed after the connectors (defers run last first): what they
		// report up to then is sent, for up to a second.
		pub, err := kvevents.New(ctx, eventsCfg, kvevents.Options{Encoding: encoding, Logger: logger})
		if err != nil {
			fmt.Fprintln(stderr, "kvserver: -kv-events-config:", err)
			return 1
		}
		defer pub.Close()
		e.events = pub
	}
	defer e.Close()

	var report any
	switch mode {
	case "serve":
		if err := serve(ctx, e, lim, *listen, stdout, stderr); err != nil {
			fmt.Fprintln(stderr, "kvserver:", err)
			return 1
		}
		return 0
	case "prefill":
		report, err = e.prefill(ctx, req)
	case "decode":
		report, err = e.decode(ctx, req)
	case "demo":
		var p *prefillReport
		if p, err = e.prefill(ctx, req); err == nil {
			var d *decodeReport
			d, err = e.decode(ctx, req)
			report = &demoReport{p, d}
		}
	}
	if err != nil {
		fmt.Fprintln(stderr, "kvserver:", err)
		if errors.Is(err, errWrongData) {
			return 3
		}
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		enc.Encode(report)
		return 0
	}
	printReport(stdout, report)
	return 0
}

// modes are what kvserver does, by the name its command line gives.
var modes = []struct{ name, summary string }{
	{"demo", "prefill, then decode, in one process (the default)"},
	{"prefill", "compute the prompt's KV and save it through the connector"},
	{"decode", "load what the connector holds for the prompt, verify every byte, recompute the rest"},
	{"serve", "serve prefill and decode over HTTP (POST /prefill, POST /decode), with /metrics, /healthz and /events, until SIGTERM"},
}

func modeNames() []string {
	names := make([]string, len(modes))
	for i, m := range modes {
		names[i] = m.name
	}
	return names
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, "usage:\n  kvserver [flags] [MODE]\n  kvserver -list-connectors [-json]\n\nmodes:\n")
	for _, m := range modes {
		fmt.Fprintf(w, "  %-8s %s\n", m.name, m.summary)
	}
	fmt.Fprintf(w, "\nflags (before the mode):\n")
	fs.PrintDefaults()
	fmt.Fprintf(w, "\nexample:\n  kvserver -kv-transfer-config '{\"kv_connector\":\"filesystem\",\"kv_connector_extra_config\":{\"shared_storage_path\":\"kv\"}}' prefill\n")
}

func printReport(w io.Writer, report any) {
	switch r := report.(type) {
	case *prefillReport:
		fmt.Fprintf(w, "prefill: %s saved %d of %d prompt tokens x %d layers through %q\n",
			r.Engine, r.Saved, r.Prompt, r.Layers, r.Connector)
	case *decodeReport:
		fmt.Fprintf(w, "decode: %s loaded %d tokens and recomputed %d of %d through %q; every loaded byte verified: %t\n",
			r.Engine, r.Loaded, r.Recomputed, r.Prompt, r.Connector, r.Verified)
	case *demoReport:
		printReport(w, r.Prefill)
		printReport(w, r.Decode)
	}
}

// demoReport is what demo mode reports: both steps, run in one process.
type demoReport struct {
	Prefill *prefillReport `json:"prefill"`
	Decode  *decodeReport  `json:"decode"`
}

// listed is a connector as -list-connectors prints it.
type listed struct {
	Name    string   `json:"name"`
	Aliases []string `json:"aliases,omitempty"`
	Roles   []string `json:"roles"`
	Import  string   `json:"import"`
	Module  string   `json:"module"`
	Version string   `json:"version"`
}

// listConnectors prints what was linked, with module versions, like
// `caddy list-modules --versions`.
func listConnectors(w io.Writer, reg *kv.Registry, asJSON bool) error {
	var items []listed
	for _, e := range reg.Entries() {
		it := listed{Name: e.Name, Aliases: e.Aliases, Import: e.ImportPath, Module: e.Module, Version: e.Version}
		for _, r := range kv.Roles() {
			if e.Serves(r.String()) {
				it.Roles = append(it.Roles, r.String())
			}
		}
		items = append(items, it)
	}
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(items)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tALIASES\tROLES\tIMPORT\tMODULE")
	for _, it := range items {
		mod := it.Module
		if it.Version != "" {
			mod += "@" + it.Version
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", it.Name, strings.Join(it.Aliases, ","), strings.Join(it.Roles, ","), it.Import, mod)
	}
	return tw.Flush()
}
