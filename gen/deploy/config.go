package deploy

import (
	"fmt"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/manifest"
	"github.com/kvgen/kvgen/registry/kv"
)

// connectorsFor returns the names of the manifest's entries that a
// --kv-transfer-config creates: the connector it names and, where that is
// a MultiConnector, its children, theirs, and so on. A name the manifest
// does not list is an error that names every such name. Its errors are
// about the config, and Build says which.
func connectorsFor(m *manifest.Manifest, data []byte) ([]string, error) {
	if m.Factory.Set {
		return nil, fmt.Errorf("a KV connector's --kv-transfer-config says which connectors to link, and %s names another contract (factory: %s); list what this deployment links in its manifest instead", m.File, m.Factory.V)
	}
	cfg, err := kv.ParseTransferConfig(data)
	if err != nil {
		return nil, err
	}
	var names, missing []string
	var walk func(cfg kv.Config, depth int) error
	walk = func(cfg kv.Config, depth int) error {
		i := slices.IndexFunc(m.Connectors, func(c manifest.Connector) bool { return c.HasName(cfg.Connector) })
		if i < 0 {
			if !slices.Contains(missing, cfg.Connector) {
				missing = append(missing, cfg.Connector)
			}
			return nil
		}
		c := m.Connectors[i]
		if !slices.Contains(names, c.Name.V) {
			names = append(names, c.Name.V)
		}
		if !isMulti(c) {
			return nil
		}
		if depth > maxNesting {
			return fmt.Errorf("MultiConnectors nest deeper than %d", maxNesting)
		}
		children, err := kv.MultiChildren(cfg)
		if err != nil {
			return err
		}
		for _, child := range children {
			if err := walk(child, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(cfg, 0); err != nil {
		return nil, err
	}
	if len(missing) > 0 {
		quoted := make([]string, len(missing))
		for i, n := range missing {
			quoted[i] = fmt.Sprintf("%q", n)
		}
		return nil, fmt.Errorf("the config creates %s, which %s does not list; add %s to the manifest, or build from a manifest that has %s",
			strings.Join(quoted, ", "), m.File, them(len(missing)), them(len(missing)))
	}
	return names, nil
}

// maxNesting bounds how deep MultiConnectors in a config may nest; a
// registry refuses to nest them at all at run time.
const maxNesting = 8

// isMulti reports whether the entry is kvgen's MultiConnector, whose
// children a config lists.
func isMulti(c manifest.Connector) bool {
	return kv.IsMultiConnector(c.Import.V, c.Constructor.V)
}

func them(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}
