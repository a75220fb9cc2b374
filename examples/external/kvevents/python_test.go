package kvevents

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvgen/kvgen/examples/external/kvevents/kveventstest"
)

// sampleNamed is sample() as a router names its fields.
const sampleNamed = `[
 {"type":"BlockStored","block_hashes":[5,9223372036854775808],"parent_block_hash":7,"token_ids":[3,4,5,6],
  "block_size":2,"lora_id":null,"medium":"CPU","lora_name":null},
 {"type":"BlockStored","block_hashes":[9],"parent_block_hash":null,"token_ids":[70000,2],
  "block_size":2,"lora_id":null,"medium":null,"lora_name":null},
 {"type":"BlockRemoved","block_hashes":[5],"medium":"DISK"},
 {"type":"AllBlocksCleared"}]`

// TestPythonSubscriber reads the events through libzmq and msgpack, as a
// Python router does, in both encodings, and replays them.
func TestPythonSubscriber(t *testing.T) {
	py := kveventstest.Python(t)
	for _, enc := range []Encoding{Maps, Arrays} {
		t.Run(enc.String(), func(t *testing.T) {
			p := start(t, func(c *Config) {
				c.Topic = "kv-events"
				c.ReplayEndpoint = "tcp://127.0.0.1:0"
			}, Options{Encoding: enc, DataParallelRank: 1})
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, py, "testdata/subscriber.py",
				"tcp://"+p.PubAddr().String(), "tcp://"+p.ReplayAddr().String(), "kv-events", "3")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			lines := bufio.NewScanner(stdout)
			lines.Buffer(nil, 1<<20)
			if !lines.Scan() || lines.Text() != "ready" {
				cmd.Wait()
				t.Fatalf("subscriber did not start: %s", stderr.String())
			}
			waitPrefixes(t, p, 1)
			events := sample()
			p.Publish(events)
			p.Publish(events[2:])
			p.Publish(events[:1])
			var got string
			if lines.Scan() {
				got = lines.Text()
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("subscriber: %v: %s", err, stderr.String())
			}
			var all []any
			mustJSON(t, sampleNamed, &all)
			want := []any{all, all[2:], all[:1]}
			var gotV []any
			mustJSON(t, got, &gotV)
			if !reflect.DeepEqual(gotV, want) {
				t.Errorf("python decoded\n%s\nwant\n%v", got, want)
			}
		})
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
}
