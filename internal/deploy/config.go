package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/gen"
	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/internal/problemcap"
	"github.com/kvgen/kvgen/internal/suggest"
)

// ErrNoSelect says that a manifest's contract declares no rule (no
// //kvgen:select line) for reading which entries a config selects, so
// Options.ForConfig cannot say what to link.
var ErrNoSelect = errors.New("declares no rule for selecting entries from a config")

// entriesFor returns the names of the manifest's entries that a config
// selects, by the rule of m's contract c: the entry the config names and,
// where that entry has children, theirs, and so on. The config is read as
// JSON, as data: no code of the contract runs. A name the manifest does not
// list is an error that names every such name. Its errors are about the
// config, and Build says which.
func entriesFor(m *manifest.Manifest, c *gen.Contract, data []byte) ([]string, error) {
	sel := c.Select
	if sel == nil {
		return nil, fmt.Errorf("the contract %s %w (with a %s line); list what this deployment links in %s instead", c, ErrNoSelect, gen.MarkerSelect, m.File)
	}
	if len(data) > maxConfigBytes {
		return nil, fmt.Errorf("%d bytes: want at most 1 MiB (%d bytes); a config is a few hundred", len(data), maxConfigBytes)
	}
	var cfg any
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, jsonError(data, err)
	}
	w := &walker{m: m, sel: sel}
	w.walk("", cfg, 0)
	if err := w.err(); err != nil {
		return nil, err
	}
	if len(w.missing) > 0 {
		quoted := make([]string, len(w.missing))
		for i, n := range w.missing {
			quoted[i] = fmt.Sprintf("%q", n)
		}
		return nil, fmt.Errorf("the config creates %s, which %s does not list; add %s to the manifest, or build from a manifest that has %s",
			strings.Join(quoted, ", "), m.File, them(len(w.missing)), them(len(w.missing)))
	}
	return w.names, nil
}

// maxNesting bounds how deep entries with children may nest in a config;
// a KV registry refuses to nest MultiConnectors at all at run time.
const maxNesting = 8

// maxConfigBytes bounds a config, as package kv bounds a transfer config.
const maxConfigBytes = 1 << 20

// walker collects what a config selects.
type walker struct {
	m              *manifest.Manifest
	sel            *gen.Select
	names, missing []string
	problems       []string
	more           int // problems past problemcap.Max
}

// problem records a problem with the config at where, a path into it
// ("" for the config itself).
func (w *walker) problem(where, format string, args ...any) {
	if len(w.problems) == problemcap.Max {
		w.more++
		return
	}
	msg := fmt.Sprintf(format, args...)
	if where != "" {
		msg = where + ": " + msg
	}
	w.problems = append(w.problems, msg)
}

func (w *walker) err() error {
	if len(w.problems) == 0 {
		return nil
	}
	lines := w.problems
	if w.more > 0 {
		lines = append(lines, problemcap.More(w.more))
	}
	return errors.New(strings.Join(lines, "\n"))
}

// walk reads the config cfg found at where, depth entries with children
// deep.
func (w *walker) walk(where string, cfg any, depth int) {
	obj, ok := cfg.(map[string]any)
	if !ok {
		w.problem(where, "want a JSON object, got %s", jsonKind(cfg))
		return
	}
	if w.sel.Keys != nil {
		for _, k := range slices.Sorted(maps.Keys(obj)) {
			if slices.Contains(w.sel.Keys, k) {
				continue
			}
			msg := "unknown key " + suggest.Quote(k)
			if near := suggest.Nearest(k, w.sel.Keys, 1); len(near) > 0 {
				msg += fmt.Sprintf(" (did you mean %q?)", near[0])
			}
			w.problem(where, "%s", msg)
		}
	}
	v, _ := lookup(obj, w.sel.Name)
	name, isString := v.(string)
	switch {
	case v == nil || isString && name == "":
		w.problem(where, "%s is required", w.sel.Name)
		return
	case !isString:
		w.problem(where, "%s: want a string, got %s", w.sel.Name, jsonKind(v))
		return
	}
	i := slices.IndexFunc(w.m.Entries, func(c manifest.Entry) bool { return c.HasName(name) })
	if i < 0 {
		if !slices.Contains(w.missing, name) {
			w.missing = append(w.missing, name)
		}
		return
	}
	c := w.m.Entries[i]
	if !slices.Contains(w.names, c.Name.V) {
		w.names = append(w.names, c.Name.V)
	}
	if !w.sel.HasChildren(c.Import.V, c.Constructor.V) {
		return
	}
	at := w.sel.Children
	if where != "" {
		at = where + "." + at
	}
	list, found := lookup(obj, w.sel.Children)
	if !found && w.sel.Multi == "" {
		return // an entry with no children in this config
	}
	children, _ := list.([]any)
	if len(children) == 0 {
		w.problem(at, "want a list of at least one config, got %s", jsonKind(list))
		return
	}
	if depth > maxNesting {
		w.problem("", "entries with children (%s) nest deeper than %d", c.Name.V, maxNesting)
		return
	}
	for i, child := range children {
		w.walk(fmt.Sprintf("%s[%d]", at, i), child, depth+1)
	}
}

// lookup returns the value at path, keys joined by dots, in obj.
func lookup(obj map[string]any, path string) (any, bool) {
	var v any = obj
	for k := range strings.SplitSeq(path, ".") {
		o, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = o[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// jsonKind says what kind of JSON value v is, as encoding/json decodes it
// into an any.
func jsonKind(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		if len(v) == 0 {
			return "an empty list"
		}
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

// jsonError places a syntax error in data at its line and column.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return err
	}
	at := min(int(se.Offset), len(data))
	if at > 0 && at < len(data) {
		at-- // Offset counts the offending byte
	}
	line := 1 + bytes.Count(data[:at], []byte("\n"))
	col := at - bytes.LastIndexByte(data[:at], '\n')
	return fmt.Errorf("line %d, column %d: %w", line, col, err)
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
