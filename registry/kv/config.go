package kv

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"sync/atomic"

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

// MaxBlockSize is the largest block size kvgen accepts. vLLM's users pick
// block sizes up to 256 tokens, and for hybrid attention and Mamba models
// vLLM computes sizes of a few thousand; 65536 leaves room above all of
// them while a block's keys and buffers stay small, so that a typo or a
// hostile config cannot make the first lookup allocate terabytes.
const MaxBlockSize = 1 << 16

// The defaults of vLLM's KVTransferConfig for the fields kvgen hands to
// connectors as they are.
const (
	DefaultKVBufferDevice = "cuda"
	DefaultKVBufferSize   = 1e9
	DefaultKVParallelSize = 1
	DefaultKVIP           = "127.0.0.1"
	DefaultKVPort         = 14579
)

// Config is what a connector is created from: vLLM's KVTransferConfig, plus
// the block size and layer names that vLLM passes separately and the model
// whose KV it is. docs/vllm.md lists where kvgen differs from vLLM.
type Config struct {
	// Connector is the registered name or alias to create (kv_connector).
	Connector string
	// EngineID identifies the engine instance (engine_id).
	EngineID string
	// KVRole is producer, consumer or both (kv_role).
	KVRole KVRole
	// BlockSize is the number of tokens in a KV block (block_size), from 1
	// to [MaxBlockSize].
	BlockSize int
	// LayerNames are the attention layers whose KV is transferred (layer_names).
	LayerNames []string
	// LoadFailurePolicy is what to do when a promised load fails
	// (kv_load_failure_policy).
	LoadFailurePolicy LoadFailurePolicy
	// Extra holds the connector's own settings (kv_connector_extra_config);
	// decode them with [DecodeExtra]. Numbers parsed from JSON are kept as
	// json.Number, so that none loses digits.
	Extra map[string]any

	// Model identifies the model whose KV this is, such as
	// "meta-llama/Llama-3.1-8B-Instruct". The host sets it, not the
	// transfer config: KV is only valid for the model that computed it, so
	// connectors keep each model's KV apart, even in one shared store
	// (see [Config.Prefixes]).
	Model string

	// KVBufferDevice is the device KV is buffered on (kv_buffer_device).
	KVBufferDevice string
	// KVBufferSize is the size of the transfer buffer in bytes
	// (kv_buffer_size).
	KVBufferSize float64
	// KVRank is the rank of this instance in the transfer, such as 0 for
	// prefill and 1 for decode (kv_rank); nil when it is not set.
	KVRank *int
	// KVParallelSize is the number of instances in the transfer
	// (kv_parallel_size).
	KVParallelSize int
	// KVIP and KVPort are the address network connectors connect through
	// (kv_ip, kv_port).
	KVIP   string
	KVPort int
	// EnablePermuteLocalKV turns on vLLM's experimental HND to NHD layout
	// change of transferred KV (enable_permute_local_kv).
	EnablePermuteLocalKV bool

	// creator is the registry that is creating the connector, for
	// composite connectors that build their children through it.
	creator *Registry
	// logger is the registry's logger, nil for slog.Default; entry and
	// role, set by Create, name the connector in what it logs.
	logger *slog.Logger
	entry  string
	role   Role
	// depth counts how deeply composite connectors are nested.
	depth int
	// created counts the connectors Create made for one transfer config,
	// composites' children included, which copies of the config share.
	created *atomic.Int32
}

// Registry returns the registry that is creating the connector, or nil when
// the constructor was called directly. Composite connectors such as
// [NewMultiConnector] build their children through it.
func (c Config) Registry() *Registry { return c.creator }

// Logger returns the logger a connector logs to: the host's, set with
// [Registry.WithLogger], with the connector's name and role attached. It is
// never nil: without a host's logger, or for a constructor called directly
// rather than through [Registry.Create], it is slog.Default(). A connector
// calls it once, in its constructor, and keeps it for its whole life
// instead of using the slog package's functions, so that no host has to
// replace slog.Default to see its warnings. It is built when asked for, so
// that Create costs nothing for connectors that log nothing.
func (c Config) Logger() *slog.Logger {
	l := c.logger
	if l == nil {
		l = slog.Default()
	}
	if c.entry == "" {
		return l
	}
	return l.With(slog.String("connector", c.entry), slog.String("role", c.role.String()))
}

// ParseTransferConfig parses the JSON of vLLM's --kv-transfer-config, so the
// same JSON a vLLM user writes configures a kvgen binary. It applies vLLM's
// types, defaults and conversions (a port may be written "14579", a size
// "1e9"); an unknown key or a bad value is an error that names the key and
// says what is wanted, and every such problem is reported at once (up to
// [MaxProblems], the rest counted). A config larger than
// [MaxTransferConfigBytes] (1 MiB) is refused before it is parsed. kv_role
// defaults to kv_both, the load-failure policy to fail (as in current vLLM),
// the block size to 16 and the engine id to a random one. Model is left
// empty for the host to set.
func ParseTransferConfig(data []byte) (Config, error) {
	cfg, err := parseTransferConfig("kv transfer config", data, Config{
		KVRole:            KVBoth,
		BlockSize:         DefaultBlockSize,
		LoadFailurePolicy: PolicyFail,
		KVBufferDevice:    DefaultKVBufferDevice,
		KVBufferSize:      DefaultKVBufferSize,
		KVParallelSize:    DefaultKVParallelSize,
		KVIP:              DefaultKVIP,
		KVPort:            DefaultKVPort,
	})
	if err != nil {
		return Config{}, err
	}
	if cfg.EngineID == "" {
		cfg.EngineID = randomEngineID()
	}
	return cfg, nil
}

// transferKeys are the keys of a transfer config: vLLM's, then kvgen's own.
var transferKeys = []string{
	"kv_connector", "engine_id", "kv_buffer_device", "kv_buffer_size",
	"kv_role", "kv_rank", "kv_parallel_size", "kv_ip", "kv_port",
	"kv_connector_extra_config", "kv_connector_module_path",
	"enable_permute_local_kv", "kv_load_failure_policy",
	"block_size", "layer_names",
}

// parseTransferConfig parses a transfer config over base: what data sets
// replaces base's value, the rest is kept, except kv_connector and
// kv_connector_extra_config, which belong to one connector. what starts
// every error.
func parseTransferConfig(what string, data []byte, base Config) (Config, error) {
	if err := checkSize(len(data)); err != nil {
		return Config{}, fmt.Errorf("%s: %w", what, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return Config{}, fmt.Errorf("%s: %w", what, jsonError(data, err))
	}
	if raw == nil {
		return Config{}, fmt.Errorf("%s: want a JSON object", what)
	}
	if err := checkKeys(what, slices.Collect(maps.Keys(raw)), transferKeys); err != nil {
		return Config{}, err
	}
	cfg := base
	cfg.Connector, cfg.Extra = "", nil
	var problems Problems
	bad := func(err error) { problems.addIn(what, err) }
	if v, ok := raw["kv_connector"]; !ok || isNull(v) || string(v) == `""` {
		bad(errors.New("kv_connector is required"))
	}
	// Keys in vLLM's order, so errors come in the order its docs list them.
	for _, k := range transferKeys {
		v, ok := raw[k]
		if !ok {
			continue
		}
		switch k {
		case "kv_connector":
			bad(optionalString(k, v, &cfg.Connector))
		case "engine_id":
			bad(optionalString(k, v, &cfg.EngineID))
		case "kv_buffer_device":
			bad(laxString(k, v, &cfg.KVBufferDevice))
		case "kv_buffer_size":
			var size float64
			if err := laxFloat(k, v, &size); err != nil {
				bad(err)
			} else if size < 0 || math.IsInf(size, 0) || math.IsNaN(size) {
				bad(fmt.Errorf("kv_buffer_size %s: want a finite number of bytes, 0 or more", shortJSON(v)))
			} else {
				cfg.KVBufferSize = size
			}
		case "kv_role":
			var r string
			if err := optionalString(k, v, &r); err != nil {
				bad(err)
			} else if r != "" {
				switch KVRole(r) {
				case KVProducer, KVConsumer, KVBoth:
					cfg.KVRole = KVRole(r)
				default:
					bad(fmt.Errorf("kv_role %s: want %q, %q or %q", shortJSON(v), KVProducer, KVConsumer, KVBoth))
				}
			}
		case "kv_rank":
			if isNull(v) {
				cfg.KVRank = nil
				break
			}
			var n int
			if err := laxInt(k, v, &n); err != nil {
				bad(err)
			} else {
				cfg.KVRank = &n
			}
		case "kv_parallel_size":
			bad(laxInt(k, v, &cfg.KVParallelSize))
		case "kv_ip":
			bad(laxString(k, v, &cfg.KVIP))
		case "kv_port":
			var port int
			if err := laxInt(k, v, &port); err != nil {
				bad(err)
			} else if port < 0 || port > 65535 {
				bad(fmt.Errorf("kv_port %d: want a TCP port, 0 to 65535", port))
			} else {
				cfg.KVPort = port
			}
		case "kv_connector_extra_config":
			bad(extraConfig(k, v, &cfg.Extra))
		case "kv_connector_module_path":
			var path string
			if err := optionalString(k, v, &path); err != nil {
				bad(err)
			} else if path != "" {
				bad(&ModulePathError{Connector: connectorName(raw), ModulePath: path})
			}
		case "enable_permute_local_kv":
			bad(laxBool(k, v, &cfg.EnablePermuteLocalKV))
		case "kv_load_failure_policy":
			var p string
			_ = laxString(k, v, &p)
			switch LoadFailurePolicy(p) {
			case PolicyRecompute, PolicyFail:
				cfg.LoadFailurePolicy = LoadFailurePolicy(p)
			default:
				bad(fmt.Errorf("kv_load_failure_policy %s: want %q or %q", shortJSON(v), PolicyRecompute, PolicyFail))
			}
		case "block_size":
			var n int
			if err := laxInt(k, v, &n); err != nil {
				bad(err)
			} else if err := checkBlockSize(n); err != nil {
				bad(fmt.Errorf("block_size %d: %w", n, err))
			} else {
				cfg.BlockSize = n
			}
		case "layer_names":
			bad(layerNames(k, v, &cfg.LayerNames))
		}
	}
	if err := problems.Err(); err != nil {
		return Config{}, err
	}
	return cfg, nil
}

// checkSize refuses an input of n bytes larger than MaxTransferConfigBytes.
func checkSize(n int) error {
	if n > MaxTransferConfigBytes {
		return fmt.Errorf("%d bytes: want at most 1 MiB (%d bytes); a transfer config is a few hundred", n, MaxTransferConfigBytes)
	}
	return nil
}

// checkBlockSize reports whether n tokens is a block size kvgen accepts.
func checkBlockSize(n int) error {
	if n < 1 || n > MaxBlockSize {
		return fmt.Errorf("want a number of tokens from 1 to %d", MaxBlockSize)
	}
	return nil
}

// connectorName returns kv_connector of a raw config for messages, or "".
func connectorName(raw map[string]json.RawMessage) string {
	var name string
	_ = json.Unmarshal(raw["kv_connector"], &name)
	return name
}

// layerNames decodes kvgen's layer_names: an array of non-empty strings.
func layerNames(key string, v json.RawMessage, dst *[]string) error {
	var names []string
	if isNull(v) || json.Unmarshal(v, &names) != nil {
		return fmt.Errorf("%s %s: want an array of layer names", key, shortJSON(v))
	}
	var problems Problems
	first := make(map[string]int, len(names))
	for i, l := range names {
		if l == "" {
			problems.Add(fmt.Errorf("%s[%d] is empty", key, i))
			continue
		}
		// A layer named twice would be one the engine saves once and a
		// connector counts twice toward a whole prefix.
		if j, dup := first[l]; dup {
			problems.Add(fmt.Errorf("%s[%d] %s is %s[%d] again; name each layer once", key, i, Quote(l), key, j))
			continue
		}
		first[l] = i
	}
	err := problems.Err()
	if err == nil {
		*dst = names
	}
	return err
}

// extraConfig decodes kv_connector_extra_config, keeping numbers as
// json.Number so that DecodeExtra sees every digit.
func extraConfig(key string, v json.RawMessage, dst *map[string]any) error {
	if isNull(v) || !bytes.HasPrefix(bytes.TrimSpace(v), []byte("{")) {
		return fmt.Errorf("%s %s: want an object", key, shortJSON(v))
	}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	*dst = m
	return nil
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
			msg = printable(te.Field) + ": " + msg
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

// checkKeys reports every key not in known, each of the first MaxProblems
// with the nearest known key, and counts the rest.
func checkKeys(what string, keys, known []string) error {
	slices.Sort(keys)
	var problems Problems
	for _, k := range keys {
		if slices.Contains(known, k) {
			continue
		}
		if problems.Full() {
			problems.Skip() // no suggestion is looked for what is not shown
			continue
		}
		msg := fmt.Sprintf("%s: unknown key %s", what, suggest.Quote(k))
		if near := suggest.Nearest(k, known, 1); len(near) > 0 {
			msg += fmt.Sprintf(" (did you mean %q?)", near[0])
		}
		problems.Add(errors.New(msg))
	}
	return problems.Err()
}
