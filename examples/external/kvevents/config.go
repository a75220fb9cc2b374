package kvevents

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sort"
	"strconv"
	"strings"
)

// DefaultEndpoint is where the publisher binds when the config names no
// endpoint: loopback only. vLLM's own default, tcp://*:5557, binds every
// interface; kvgen does that only when the config says so.
const DefaultEndpoint = "tcp://127.0.0.1:5557"

// defaultEndpoint is DefaultEndpoint; tests bind port 0 instead.
var defaultEndpoint = DefaultEndpoint

// Config is vLLM's KVEventsConfig, the JSON of its --kv-events-config
// flag, with vLLM's field names and defaults. Get one from [Parse].
type Config struct {
	// EnableKVCacheEvents turns events on (enable_kv_cache_events).
	EnableKVCacheEvents bool `json:"enable_kv_cache_events"`
	// Publisher is "zmq" or "null". Absent, it is "zmq" when events are
	// enabled and "null" otherwise, as in vLLM.
	Publisher string `json:"publisher"`
	// Endpoint is the PUB socket's address. One holding "*" or "::", or
	// an ipc:// one, is bound; any other is connected to. Empty means
	// [DefaultEndpoint], bound.
	Endpoint string `json:"endpoint,omitempty"`
	// ReplayEndpoint, if set, is bound as a ROUTER socket that sends a
	// subscriber the buffered batches from the sequence number it asks for.
	ReplayEndpoint string `json:"replay_endpoint"`
	// BufferSteps is how many of the latest batches replay can send.
	BufferSteps int `json:"buffer_steps"`
	// HWM bounds each subscriber's batches, queued or being written:
	// past it, batches for that subscriber are dropped and counted.
	HWM int `json:"hwm"`
	// MaxQueueSize bounds the calls waiting to be sent, a batch for each
	// [Publisher.Publish] and an event for each [Publisher.Emit]; past
	// it, the call's batch or event is dropped and counted.
	MaxQueueSize int `json:"max_queue_size"`
	// Topic is the first frame of every message; subscribers filter on it.
	Topic string `json:"topic"`
}

// DefaultConfig returns vLLM's defaults: events off.
func DefaultConfig() Config {
	return Config{
		Publisher:    "null",
		BufferSteps:  10000,
		HWM:          100000,
		MaxQueueSize: 100000,
	}
}

// Enabled reports whether the config asks for events on ZeroMQ: vLLM
// publishes none unless enable_kv_cache_events is true and the publisher
// is "zmq".
func (c Config) Enabled() bool {
	return c.EnableKVCacheEvents && c.Publisher == "zmq"
}

// configKeys are the fields of vLLM's KVEventsConfig.
var configKeys = []string{
	"enable_kv_cache_events", "publisher", "endpoint", "replay_endpoint",
	"buffer_steps", "hwm", "max_queue_size", "topic",
}

// Parse reads a --kv-events-config JSON object. Missing fields take
// vLLM's defaults. A key vLLM does not know is refused, listing the
// known ones, and so is a key given twice: a misspelt or repeated key
// would otherwise leave a default (such as the endpoint) in force
// unnoticed.
func Parse(data []byte) (Config, error) {
	raw, err := objectFields(data)
	if err != nil {
		return Config{}, fmt.Errorf("kv events config: %w", err)
	}
	var unknown []string
	for k := range raw {
		if !contains(configKeys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		k := unknown[0]
		// %q escapes what a terminal would act on; the known keys are few
		// enough to list, which says what was meant without guessing.
		return Config{}, fmt.Errorf("kv events config: unknown key %q; known keys: %s", k, strings.Join(configKeys, ", "))
	}
	c := DefaultConfig()
	c.Publisher = ""
	// null stands for the default where vLLM's field is optional, as None
	// does there; vLLM refuses it elsewhere.
	for k, v := range raw {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			if k != "publisher" && k != "replay_endpoint" {
				return Config{}, fmt.Errorf("kv events config: %s: null: give a value, or leave the key out for the default", k)
			}
			delete(raw, k)
		}
	}
	fields := map[string]any{
		"enable_kv_cache_events": &c.EnableKVCacheEvents,
		"publisher":              &c.Publisher,
		"endpoint":               &c.Endpoint,
		"replay_endpoint":        &c.ReplayEndpoint,
		"buffer_steps":           &c.BufferSteps,
		"hwm":                    &c.HWM,
		"max_queue_size":         &c.MaxQueueSize,
		"topic":                  &c.Topic,
	}
	for k, v := range raw {
		if err := json.Unmarshal(v, fields[k]); err != nil {
			var want string
			switch fields[k].(type) {
			case *bool:
				want = "true or false"
			case *int:
				want = "a whole number that fits in 64 bits, without quotes or a decimal point"
			default:
				want = "a string"
			}
			return Config{}, fmt.Errorf("kv events config: %s: %s: want %s", k, shown(v), want)
		}
	}
	// vLLM's ZeroMQ cannot bind or connect to "": an empty endpoint is a
	// mistake, not the default.
	if _, ok := raw["endpoint"]; ok && c.Endpoint == "" {
		return Config{}, errors.New("kv events config: endpoint \"\": want tcp://host:port or ipc://path, or leave the key out for the default")
	}
	if _, ok := raw["publisher"]; ok && c.Publisher == "" {
		return Config{}, errors.New(`kv events config: publisher "": want "zmq" or "null", or leave the key out`)
	}
	if c.Publisher == "" {
		c.Publisher = "null"
		if c.EnableKVCacheEvents {
			c.Publisher = "zmq"
		}
	}
	if err := c.Validate(); err != nil {
		return Config{}, err
	}
	return c, nil
}

// Validate checks what [Parse] checks, for a Config built in Go.
func (c Config) Validate() error {
	if c.Publisher != "zmq" && c.Publisher != "null" {
		return fmt.Errorf("kv events config: publisher %q: want \"zmq\" or \"null\"", c.Publisher)
	}
	// vLLM passes 0 on to ZeroMQ and Python's queue, where it means no
	// limit; kvgen keeps every queue bounded.
	if c.HWM <= 0 {
		return fmt.Errorf("kv events config: hwm %d: want at least 1 (vLLM's 0, no limit, is not offered)", c.HWM)
	}
	if c.MaxQueueSize <= 0 {
		return fmt.Errorf("kv events config: max_queue_size %d: want at least 1 (vLLM's 0, no limit, is not offered)", c.MaxQueueSize)
	}
	if c.BufferSteps < 0 {
		return fmt.Errorf("kv events config: buffer_steps %d: want 0 or more", c.BufferSteps)
	}
	if _, err := parseEndpoint(c.Endpoint, 0, false); err != nil {
		return fmt.Errorf("kv events config: endpoint: %w", err)
	}
	if c.ReplayEndpoint != "" {
		if _, err := parseEndpoint(c.ReplayEndpoint, 0, true); err != nil {
			return fmt.Errorf("kv events config: replay_endpoint: %w", err)
		}
	}
	return nil
}

// maxSocketPath is the longest path a Unix socket may have on Linux
// (sun_path's 108 bytes, ending in NUL).
const maxSocketPath = 107

// objectFields reads a JSON object's fields, refusing anything else and
// a key given twice, which encoding/json would let the last one win.
func objectFields(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if t, err := dec.Token(); err != nil {
		return nil, unexpectedEOF(err)
	} else if t != json.Delim('{') {
		return nil, fmt.Errorf("want a JSON object, got %s", kindOf(t))
	}
	fields := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, unexpectedEOF(err)
		}
		k := t.(string) // inside an object, the decoder gives keys as strings
		if _, ok := fields[k]; ok {
			return nil, fmt.Errorf("key %q given twice", k)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, unexpectedEOF(err)
		}
		fields[k] = v
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return nil, unexpectedEOF(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("want one JSON object, with nothing after it")
	}
	return fields, nil
}

// kindOf names what a JSON value starting with token t is.
func kindOf(t json.Token) string {
	switch t.(type) {
	case nil:
		return "null"
	case json.Delim:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "true or false"
	default:
		return "a number"
	}
}

// shown quotes a value from the config for an error, at most 64 bytes of
// it: %q escapes what a terminal would act on.
func shown(v []byte) string {
	v = bytes.TrimSpace(v)
	if len(v) > 64 {
		return fmt.Sprintf("%q (%d bytes)", v[:64], len(v))
	}
	return fmt.Sprintf("%q", v)
}

// unexpectedEOF says that the config ended too soon, where the decoder
// says only EOF.
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return errors.New("the JSON ends before the object does (quoted for the shell?)")
	}
	return err
}

// endpoint is a parsed ZeroMQ address.
type endpoint struct {
	network string // "tcp" or "unix"
	address string // for net.Listen or net.Dial
	bind    bool
}

func (e endpoint) String() string {
	if e.network == "unix" {
		return "ipc://" + e.address
	}
	return "tcp://" + e.address
}

// parseEndpoint applies vLLM's rules: an address with "*" or "::", or an
// ipc:// one, is bound, any other connected to (a replay endpoint is
// always bound); data-parallel rank r adds r to a TCP port. "" is
// [DefaultEndpoint], bound.
func parseEndpoint(s string, rank int, alwaysBind bool) (endpoint, error) {
	if s == "" {
		s, alwaysBind = defaultEndpoint, true
	}
	bind := alwaysBind || strings.Contains(s, "*") || strings.Contains(s, "::")
	switch {
	case strings.HasPrefix(s, "ipc://"):
		if rank != 0 {
			// vLLM refuses too: it offsets only tcp and inproc addresses.
			return endpoint{}, fmt.Errorf("%q: data-parallel rank %d needs a tcp endpoint", s, rank)
		}
		path := strings.TrimPrefix(s, "ipc://")
		if path == "" || path == "*" {
			return endpoint{}, fmt.Errorf("%q: want ipc://path", s)
		}
		if len(path) > maxSocketPath {
			return endpoint{}, fmt.Errorf("%q: the path is %d bytes; a socket's path may have at most %d", s, len(path), maxSocketPath)
		}
		return endpoint{network: "unix", address: path, bind: true}, nil
	case strings.HasPrefix(s, "inproc://"):
		return endpoint{}, fmt.Errorf("%q: inproc is in-process to Python's ZeroMQ; use tcp:// or ipc://", s)
	case strings.HasPrefix(s, "tcp://"):
	default:
		return endpoint{}, fmt.Errorf("%q: want tcp://host:port or ipc://path", s)
	}
	hostport := strings.TrimPrefix(s, "tcp://")
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		// ZeroMQ reads an IPv6 address without brackets too, up to the
		// last colon.
		i := strings.LastIndexByte(hostport, ':')
		if a, perr := netip.ParseAddr(hostport[:max(i, 0)]); i < 0 || perr != nil || !a.Is6() {
			why := err.Error()
			if ae, ok := err.(*net.AddrError); ok {
				why = ae.Err // without the address, which %q shows escaped
			}
			if strings.Count(hostport, ":") > 1 {
				why += "; write an IPv6 address in brackets: tcp://[::1]:5557"
			}
			return endpoint{}, fmt.Errorf("%q: %s", s, why)
		}
		host, portStr = hostport[:i], hostport[i+1:]
	}
	port, err := strconv.Atoi(portStr)
	if err != nil || port < 0 || port > 65535 {
		return endpoint{}, fmt.Errorf("%q: port %q: want 0 to 65535", s, portStr)
	}
	if port != 0 {
		port += rank
		if port > 65535 {
			return endpoint{}, fmt.Errorf("%q: port %d plus data-parallel rank %d is past 65535", s, port-rank, rank)
		}
	}
	switch host {
	case "*":
		host = ""
	case "":
		return endpoint{}, fmt.Errorf("%q: want a host, or * for every interface", s)
	}
	if !bind && port == 0 {
		return endpoint{}, fmt.Errorf("%q: cannot connect to port 0", s)
	}
	return endpoint{network: "tcp", address: net.JoinHostPort(host, strconv.Itoa(port)), bind: bind}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
