package kvevents

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// Integers go out in the shortest form msgpack's encoders write (block
// hashes excepted), and long strings and arrays with 16-bit lengths, as
// a generic msgpack decoder reads them back.
func TestEncodingWidths(t *testing.T) {
	name := strings.Repeat("l", 40)
	hs := make([]kv.BlockHash, 20)
	ev := kv.KVEvent{Kind: kv.BlockStored, BlockHashes: hs, BlockSize: 1,
		TokenIDs: make([]uint32, 14, 20), LoraName: name}
	ev.TokenIDs = append(ev.TokenIDs, 127, 128, 255, 256, 65535, 65536)
	payload, err := encodeBatch(float64(time.Now().Unix()), []kv.KVEvent{ev}, 300, Arrays)
	if err != nil {
		t.Fatal(err)
	}
	b := decode(t, payload)
	if b[2] != uint16(300) {
		t.Errorf("rank %#v", b[2])
	}
	got := b[1].([]any)[0].([]any)
	if n := len(got[1].([]any)); n != 20 {
		t.Errorf("%d hashes", n)
	}
	toks := got[3].([]any)
	if want := []any{int8(127), uint8(128), uint8(255), uint16(256), uint16(65535), uint32(65536)}; len(toks) != 20 || !reflect.DeepEqual(toks[14:], want) {
		t.Errorf("token ids %#v, want 20 ending %#v", toks, want)
	}
	if got[7] != name {
		t.Errorf("lora_name %#v", got[7])
	}
}
