package registry

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kvgen/kvgen/internal/suggest"
)

// KVRole says whether an engine produces KV (prefill), consumes it (decode),
// or both. The values are vLLM's.
type KVRole string

// The KV roles vLLM knows.
const (
	KVProducer KVRole = "kv_producer"
	KVConsumer KVRole = "kv_consumer"
	KVBoth     KVRole = "kv_both"
)

// LoadFailurePolicy says what the engine does when a load that the scheduler
// was promised fails: recompute the tokens, or fail the request.
type LoadFailurePolicy string

// The load-failure policies vLLM knows.
const (
	PolicyRecompute LoadFailurePolicy = "recompute"
	PolicyFail      LoadFailurePolicy = "fail"
)

// DefaultBlockSize is vLLM's default number of tokens in a KV block.
const DefaultBlockSize = 16

// Config is what a connector is created from: vLLM's KVTransferConfig, plus
// the block size and layer names that vLLM passes separately.
type Config struct {
	// Connector is the registered name or alias to create (kv_connector).
	Connector string
	// EngineID identifies the engine instance (engine_id).
	EngineID string
	// KVRole is producer, consumer or both (kv_role).
	KVRole KVRole
	// BlockSize is the number of tokens in a KV block (block_size).
	BlockSize int
	// LayerNames are the attention layers whose KV is transferred (layer_names).
	LayerNames []string
	// LoadFailurePolicy is what to do when a promised load fails
	// (kv_load_failure_policy).
	LoadFailurePolicy LoadFailurePolicy
	// Extra holds the connector's own settings (kv_connector_extra_config);
	// decode them with [DecodeExtra].
	Extra map[string]any

	// creator is the registry that is creating the connector, for
	// composite connectors that build their children through it.
	creator *Registry
	// depth counts how deeply composite connectors are nested.
	depth int
}

// Registry returns the registry that is creating the connector, or nil when
// the constructor was called directly. Composite connectors such as
// [NewMultiConnector] build their children through it.
func (c Config) Registry() *Registry { return c.creator }

// transferConfig is the JSON form of vLLM's --kv-transfer-config.
type transferConfig struct {
	Connector         *string         `json:"kv_connector"`
	EngineID          *string         `json:"engine_id"`
	KVRole            *string         `json:"kv_role"`
	BlockSize         *int            `json:"block_size"`
	LayerNames        []string        `json:"layer_names"`
	LoadFailurePolicy *string         `json:"kv_load_failure_policy"`
	Extra             map[string]any  `json:"kv_connector_extra_config"`
	ModulePath        json.RawMessage `json:"kv_connector_module_path"`

	// Accepted so that a vLLM user's JSON parses unchanged: they configure
	// GPU buffers and vLLM's own transport, which have no meaning here.
	BufferDevice         json.RawMessage `json:"kv_buffer_device"`
	BufferSize           json.RawMessage `json:"kv_buffer_size"`
	Rank                 json.RawMessage `json:"kv_rank"`
	ParallelSize         json.RawMessage `json:"kv_parallel_size"`
	IP                   json.RawMessage `json:"kv_ip"`
	Port                 json.RawMessage `json:"kv_port"`
	EnablePermuteLocalKV json.RawMessage `json:"enable_permute_local_kv"`
}

// ParseTransferConfig parses the JSON of vLLM's --kv-transfer-config, so the
// same JSON a vLLM user writes configures a kvgen binary. An unknown key is
// an error that names the nearest known one. Missing values get vLLM's
// defaults: kv_role kv_both, policy recompute, block size 16 and a random
// engine id.
func ParseTransferConfig(data []byte) (Config, error) {
	cfg, err := parseTransferConfig("kv transfer config", data, Config{
		KVRole:            KVBoth,
		BlockSize:         DefaultBlockSize,
		LoadFailurePolicy: PolicyRecompute,
	})
	if err != nil {
		return Config{}, err
	}
	if cfg.EngineID == "" {
		cfg.EngineID = randomEngineID()
	}
	return cfg, nil
}

// parseTransferConfig parses a transfer config over base: what data sets
// replaces base's value, the rest is kept, except kv_connector and
// kv_connector_extra_config, which belong to one connector. what starts
// every error.
func parseTransferConfig(what string, data []byte, base Config) (Config, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("%s: %w", what, jsonError(data, err))
	}
	if raw == nil {
		return Config{}, fmt.Errorf("%s: want a JSON object", what)
	}
	if err := checkKeys(what, slices.Collect(maps.Keys(raw)), jsonKeys(transferConfig{})); err != nil {
		return Config{}, err
	}
	var tc transferConfig
	if err := json.Unmarshal(data, &tc); err != nil {
		return Config{}, fmt.Errorf("%s: %w", what, jsonError(data, err))
	}
	cfg := base
	cfg.Connector, cfg.Extra = "", tc.Extra
	var errs []error
	if tc.Connector == nil || *tc.Connector == "" {
		errs = append(errs, fmt.Errorf("%s: kv_connector is required", what))
	} else {
		cfg.Connector = *tc.Connector
	}
	if tc.EngineID != nil && *tc.EngineID != "" {
		cfg.EngineID = *tc.EngineID
	}
	if tc.KVRole != nil {
		switch r := KVRole(*tc.KVRole); r {
		case KVProducer, KVConsumer, KVBoth:
			cfg.KVRole = r
		default:
			errs = append(errs, fmt.Errorf("%s: kv_role %q: want %q, %q or %q", what, r, KVProducer, KVConsumer, KVBoth))
		}
	}
	if tc.BlockSize != nil {
		if *tc.BlockSize <= 0 {
			errs = append(errs, fmt.Errorf("%s: block_size %d: want a positive number of tokens", what, *tc.BlockSize))
		} else {
			cfg.BlockSize = *tc.BlockSize
		}
	}
	if tc.LoadFailurePolicy != nil {
		switch p := LoadFailurePolicy(*tc.LoadFailurePolicy); p {
		case PolicyRecompute, PolicyFail:
			cfg.LoadFailurePolicy = p
		default:
			errs = append(errs, fmt.Errorf("%s: kv_load_failure_policy %q: want %q or %q", what, p, PolicyRecompute, PolicyFail))
		}
	}
	if tc.LayerNames != nil {
		cfg.LayerNames = tc.LayerNames
		for i, l := range cfg.LayerNames {
			if l == "" {
				errs = append(errs, fmt.Errorf("%s: layer_names[%d] is empty", what, i))
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

func randomEngineID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails.
	return hex.EncodeToString(b[:])
}

// jsonError adds the line and column to a JSON syntax error.
func jsonError(data []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the bytes read, the offending one included; at
		// the end of the input the position is just past the last byte.
		at := int(se.Offset)
		if at > 0 && (at < len(data) || se.Error() != "unexpected end of JSON input") {
			at--
		}
		at = min(at, len(data))
		line := 1 + bytes.Count(data[:at], []byte("\n"))
		col := at - bytes.LastIndexByte(data[:at], '\n')
		return fmt.Errorf("line %d, column %d: %w", line, col, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		msg := fmt.Sprintf("got JSON %s, want %s", te.Value, goTypeInJSON(te.Type.String()))
		if te.Field != "" {
			msg = te.Field + ": " + msg
		}
		return errors.New(msg)
	}
	return err
}

func goTypeInJSON(t string) string {
	switch {
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "string", strings.HasPrefix(t, "*string"):
		return "a string"
	case t == "bool":
		return "true or false"
	case strings.HasPrefix(t, "[]"):
		return "an array"
	case strings.HasPrefix(t, "map["):
		return "an object"
	}
	return t
}

// checkKeys reports every key not in known, each with the nearest known key.
func checkKeys(what string, keys, known []string) error {
	slices.Sort(keys)
	var errs []error
	for _, k := range keys {
		if slices.Contains(known, k) {
			continue
		}
		msg := fmt.Sprintf("%s: unknown key %q", what, k)
		if near := suggest.Nearest(k, known, 1); len(near) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", near[0])
		}
		errs = append(errs, errors.New(msg))
	}
	return errors.Join(errs...)
}
