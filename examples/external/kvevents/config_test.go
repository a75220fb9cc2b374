package kvevents

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		json string
		want Config
	}{
		{`{}`, DefaultConfig()},
		{`{"enable_kv_cache_events": true}`, func() Config {
			c := DefaultConfig()
			c.EnableKVCacheEvents, c.Publisher = true, "zmq"
			return c
		}()},
		{`{"enable_kv_cache_events": true, "publisher": "null", "replay_endpoint": null}`, func() Config {
			c := DefaultConfig()
			c.EnableKVCacheEvents = true
			return c
		}()},
		{`{"enable_kv_cache_events": true, "endpoint": "tcp://*:6000", "replay_endpoint": "tcp://*:6001",
		   "buffer_steps": 5, "hwm": 6, "max_queue_size": 7, "topic": "kv"}`,
			Config{true, "zmq", "tcp://*:6000", "tcp://*:6001", 5, 6, 7, "kv"}},
	} {
		got, err := Parse([]byte(tc.json))
		if err != nil {
			t.Fatalf("%s: %v", tc.json, err)
		}
		if got != tc.want {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.json, got, tc.want)
		}
	}
	if !(Config{EnableKVCacheEvents: true, Publisher: "zmq"}).Enabled() || (Config{Publisher: "zmq"}).Enabled() {
		t.Error("Enabled")
	}
}

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct{ json, want string }{
		{`{"enable_kv_cache_event": true}`, `unknown key "enable_kv_cache_event"; known keys: enable_kv_cache_events, `},
		{`{"replay-endpoint": "tcp://*:1"}`, `unknown key "replay-endpoint"; known keys: `},
		{`{"zzzzzzzzzzzz": 1}`, `unknown key "zzzzzzzzzzzz"; known keys:`},
		{`{"publisher": "kafka"}`, `publisher "kafka"`},
		{`{"hwm": 0}`, `hwm 0: want at least 1`},
		{`{"max_queue_size": -1}`, `max_queue_size -1`},
		{`{"buffer_steps": -1}`, `buffer_steps -1`},
		{`{"buffer_steps": 1.5}`, `buffer_steps`},
		{`{"endpoint": "inproc://cache"}`, `inproc`},
		{`{"endpoint": "udp://x:1"}`, `want tcp://host:port`},
		{`{"endpoint": "tcp://host"}`, `missing port`},
		{`{"endpoint": "tcp://host:0"}`, `cannot connect to port 0`},
		{`null`, `want a JSON object, got null`},
		{`[1]`, `want a JSON object, got an array`},
		{`{} {}`, `nothing after it`},
		{`{"endpoint": "tcp://*:1", "endpoint": "tcp://127.0.0.1:1"}`, `key "endpoint" given twice`},
		{`{"hwm": null}`, `hwm: null: give a value, or leave the key out`},
		{`{"endpoint": null}`, `endpoint: null`},
		{`{"endpoint": ""}`, `endpoint "": want tcp://host:port or ipc://path`},
		{`{"enable_kv_cache_events": 1}`, `enable_kv_cache_events: "1": want true or false`},
		{`{"hwm": "1000"}`, `hwm: "\"1000\"": want a whole number`},
		{`{"hwm": 100000.0}`, `want a whole number`},
		{`{"topic": ["\u001b[2J` + strings.Repeat("x", 100) + `"]}`, `topic: "[\"\\u001b[2Jxxx`},
		{`{"topic": ["` + strings.Repeat("x", 100) + `"]}`, `xxx" (104 bytes): want a string`},
		{`{"endpoint": "ipc:///` + strings.Repeat("d", 120) + `"}`, `the path is 121 bytes; a socket's path may have at most 107`},
		{`{"endpoint": "tcp://fe80::1::5557"}`, `write an IPv6 address in brackets`},
		{`{"endpoint": "tcp://host"}`, `"tcp://host": missing port in address`},
		{`{"endpoint": "tcp://\u001b[2J\nkvserver: forged:1:2"}`, `"tcp://\x1b[2J\nkvserver: forged:1:2": `},
		{``, `the JSON ends before the object does`},
		{`{"enable_kv_cache_events": true`, `the JSON ends before the object does`},
		{`{"publisher": ""}`, `publisher "": want "zmq" or "null"`},
		{`{"hwm": 99999999999999999999}`, `want a whole number that fits in 64 bits`},
	} {
		_, err := Parse([]byte(tc.json))
		if err != nil && strings.ContainsRune(err.Error(), 0x1b) {
			t.Errorf("%s: the error holds a raw escape: %q", tc.json, err)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want an error containing %q", tc.json, err, tc.want)
		}
	}
}

func TestParseEndpoint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		rank int
		want endpoint
	}{
		{"", 0, endpoint{"tcp", "127.0.0.1:0", true}}, // defaultEndpoint, as TestMain sets it
		{"tcp://*:5557", 0, endpoint{"tcp", ":5557", true}},
		{"tcp://*:5557", 2, endpoint{"tcp", ":5559", true}},
		{"tcp://[::]:5557", 1, endpoint{"tcp", "[::]:5558", true}},
		{"tcp://10.0.0.1:5557", 0, endpoint{"tcp", "10.0.0.1:5557", false}},
		{"tcp://indexer:5557", 3, endpoint{"tcp", "indexer:5560", false}},
		{"ipc:///run/kv.sock", 0, endpoint{"unix", "/run/kv.sock", true}},
		// ZeroMQ reads IPv6 without brackets up to the last colon; "::"
		// binds, by vLLM's rule.
		{"tcp://::1:5557", 0, endpoint{"tcp", "[::1]:5557", true}},
		{"tcp://fe80::1:5557", 1, endpoint{"tcp", "[fe80::1]:5558", true}},
		{"tcp://fe80::1%eth0:5557", 0, endpoint{"tcp", "[fe80::1%eth0]:5557", true}},
	} {
		got, err := parseEndpoint(tc.in, tc.rank, false)
		if err != nil || got != tc.want {
			t.Errorf("%q rank %d: got %+v, %v; want %+v", tc.in, tc.rank, got, err, tc.want)
		}
	}
	if got, _ := parseEndpoint(DefaultEndpoint, 0, true); got != (endpoint{"tcp", "127.0.0.1:5557", true}) {
		t.Errorf("the default endpoint as a replay endpoint: %+v", got)
	}
	for _, tc := range []struct {
		in   string
		rank int
	}{{"ipc:///run/kv.sock", 1}, {"tcp://*:65535", 1}} {
		if _, err := parseEndpoint(tc.in, tc.rank, false); err == nil {
			t.Errorf("%q rank %d: no error", tc.in, tc.rank)
		}
	}
}
