package conformance_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kvgen/kvgen/registry/conformance"
	"github.com/kvgen/kvgen/registry/kv"
)

func TestRun(t *testing.T) {
	conformance.Run(t, newFactory(""), conformance.Options{})
}

func TestRunOneRole(t *testing.T) {
	for _, role := range kv.Roles() {
		t.Run(role.String(), func(t *testing.T) {
			conformance.Run(t, newFactory(""), conformance.Options{Roles: []string{role.String()}})
		})
	}
}

// defectEnv tells a child test process which defect to run the suite on.
const defectEnv = "KVGEN_CONFORMANCE_DEFECT"

// TestSuiteCatchesDefects runs the suite on connectors with one defect each,
// in a child process since the suite fails its test, and checks that the
// subtest meant to catch the defect fails.
func TestSuiteCatchesDefects(t *testing.T) {
	if d := os.Getenv(defectEnv); d != "" {
		conformance.Run(t, newFactory(defect(d)), conformance.Options{})
		return
	}
	for _, c := range []struct {
		defect  defect
		subtest string
	}{
		{schedulerMissing, "RolesServed"},
		{storePerInstance, "BothRolesInOneProcess"},
		{ignoresLayer, "RoundTrip"},
		{missWithoutError, "Miss/NeverSaved"},
		{unchainedKeys, "Miss/DivergingPrompt"},
		{anyLayerMatches, "Miss/PartialLayers"},
		{ignoresComputed, "MatchedTokens"},
		{acceptsMisaligned, "SaveRejectsBadPrefix"},
		{retainsSaved, "NoSharedSlices"},
		{sharesLoaded, "NoSharedSlices"},
		{closeTwiceFails, "CloseIdempotent"},
		{ignoresSettings, "UnknownSetting"},
		{reportsStranger, "Finished"},
		{ignoresModel, "IsolatedByModel"},
	} {
		t.Run(string(c.defect), func(t *testing.T) {
			t.Parallel()
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestSuiteCatchesDefects$")
			// Built with -race, the child would sleep a second on exit
			// for other goroutines' reports.
			cmd.Env = append(os.Environ(), defectEnv+"="+string(c.defect), "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "the suite passed a connector with the defect %q:\n%s", c.defect, out)
			assert.Contains(t, string(out), "--- FAIL: TestSuiteCatchesDefects/"+c.subtest+" ")
		})
	}
}

// defect names one way to break the connector contract; "" is none.
type defect string

const (
	schedulerMissing  defect = "scheduler-missing"
	storePerInstance  defect = "store-per-instance"
	ignoresLayer      defect = "ignores-layer"
	missWithoutError  defect = "miss-without-error"
	unchainedKeys     defect = "unchained-keys"
	anyLayerMatches   defect = "any-layer-matches"
	ignoresComputed   defect = "ignores-computed"
	acceptsMisaligned defect = "accepts-misaligned"
	retainsSaved      defect = "retains-saved"
	sharesLoaded      defect = "shares-loaded"
	closeTwiceFails   defect = "close-twice-fails"
	ignoresSettings   defect = "ignores-settings"
	reportsStranger   defect = "reports-stranger"
	ignoresModel      defect = "ignores-model"
)

// newFactory returns the factory of a small map-backed connector whose
// instances share one store, with the defect d.
func newFactory(d defect) kv.Factory {
	shared := &store{kv: map[key][]byte{}}
	return func(ctx context.Context, cfg kv.Config, role kv.Role) (kv.Connector, error) {
		if d != ignoresSettings {
			var opts struct{}
			if err := kv.DecodeExtra(cfg.Extra, &opts); err != nil {
				return nil, err
			}
		}
		st := shared
		if d == storePerInstance {
			st = &store{kv: map[key][]byte{}}
		}
		c := &mapConnector{store: st, cfg: cfg, defect: d}
		if d == schedulerMissing && role == kv.RoleScheduler {
			return workerOnly{c}, nil
		}
		return c, nil
	}
}

type workerOnly struct{ kv.Worker }

type key struct{ prefix, layer string }

type store struct {
	mu sync.Mutex
	kv map[key][]byte
}

type mapConnector struct {
	*store
	cfg    kv.Config
	defect defect
	closed bool
}

func (c *mapConnector) key(req *kv.Request, layer string, n int) key {
	bs := c.cfg.BlockSize
	if c.defect == ignoresLayer {
		layer = ""
	}
	if c.defect == unchainedKeys {
		return key{fmt.Sprint(n, req.PromptTokens[n-bs:n]), layer}
	}
	m := c.cfg.Model
	if c.defect == ignoresModel {
		m = ""
	}
	p, _ := kv.NewPrefixes(m, bs)
	h, _ := p.Hash(req.PromptTokens, n)
	return key{h.String(), layer}
}

func (c *mapConnector) MatchedTokens(_ context.Context, req *kv.Request, numComputed int) (int, error) {
	bs := c.cfg.BlockSize
	c.mu.Lock()
	defer c.mu.Unlock()
	for n := len(req.PromptTokens) / bs * bs; n > numComputed; n -= bs {
		found := 0
		for _, l := range c.cfg.LayerNames {
			if _, ok := c.kv[c.key(req, l, n)]; ok {
				found++
			}
		}
		if found == len(c.cfg.LayerNames) || found > 0 && c.defect == anyLayerMatches {
			if c.defect == ignoresComputed {
				return n, nil
			}
			return n - numComputed, nil
		}
	}
	return 0, nil
}

func (c *mapConnector) AfterAlloc(context.Context, *kv.Request, int) error { return nil }

func (c *mapConnector) RequestFinished(context.Context, *kv.Request) error { return nil }

func (c *mapConnector) SaveLayer(_ context.Context, req *kv.Request, layer string, n int, kvData []byte) error {
	bs := c.cfg.BlockSize
	if c.defect == acceptsMisaligned {
		if n = n / bs * bs; n <= 0 || n > len(req.PromptTokens) {
			return nil
		}
	} else if err := kv.CheckPrefix(len(req.PromptTokens), bs, n); err != nil {
		return err
	}
	if c.defect != retainsSaved {
		kvData = slices.Clone(kvData)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.kv[c.key(req, layer, n)] = kvData
	return nil
}

func (c *mapConnector) LoadLayer(_ context.Context, req *kv.Request, layer string, n int) ([]byte, error) {
	if err := kv.CheckPrefix(len(req.PromptTokens), c.cfg.BlockSize, n); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	kvData, ok := c.kv[c.key(req, layer, n)]
	switch {
	case !ok && c.defect == missWithoutError:
		return nil, nil
	case !ok:
		return nil, fmt.Errorf("%s: %w", layer, kv.ErrMiss)
	case c.defect == sharesLoaded:
		return kvData, nil
	}
	return slices.Clone(kvData), nil
}

func (c *mapConnector) WaitForSave(context.Context) error { return nil }

func (c *mapConnector) Finished(_ context.Context, finished []string) (sent, received []string, err error) {
	if c.defect == reportsStranger {
		finished = append(finished, "stranger")
	}
	return finished, slices.Clone(finished), nil
}

func (c *mapConnector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed && c.defect == closeTwiceFails {
		return errors.New("already closed")
	}
	c.closed = true
	return nil
}
