"""A router's view of kvgen's KV events, through libzmq (pyzmq).

Usage: subscriber.py [--bind] [--encoding maps|arrays] PUB_ENDPOINT REPLAY_ENDPOINT TOPIC COUNT

Subscribes to TOPIC, connecting to PUB_ENDPOINT, or with --bind binding it
for a publisher that connects (as vLLM does to an endpoint without "*"),
and prints "ready" (with --bind, "ready" and the endpoint bound, so that
port * can be asked for). COUNT "-" is read from stdin after "ready", so
that a test can say how many batches to expect once it has made them.
With --encoding, an event encoded otherwise is a mismatch.
Reads COUNT batches, checks each as
vLLM's msgspec decoder of KVEventBatch would (an array batch; events
tagged by "type" as maps, or by a leading tag as arrays; every required
field present; integers never bools; hashes within 64 bits), asks the
replay socket for every batch from 0 and checks that the replies equal
the live payloads byte for byte. Prints one JSON line: the events, each
as a map, per batch. Exits non-zero on the first mismatch.
"""

import json
import sys

import msgpack
import zmq

# Fields in declaration order; those with a default may be left out.
FIELDS = {
    "BlockStored": (
        ["block_hashes", "parent_block_hash", "token_ids", "block_size",
         "lora_id", "medium", "lora_name"],
        ["extra_keys", "group_idx", "kv_cache_spec_kind",
         "kv_cache_spec_sliding_window"],
    ),
    "BlockRemoved": (["block_hashes", "medium"], ["group_idx"]),
    "AllBlocksCleared": ([], []),
}


def fail(msg):
    print(msg, file=sys.stderr)
    sys.exit(1)


def is_int(x):
    return type(x) is int


def check_type(name, value):
    def int_list(v):
        return isinstance(v, list) and all(is_int(i) for i in v)

    def opt(pred):
        return lambda v: v is None or pred(v)

    hash_ok = lambda v: is_int(v) and 0 <= v < 1 << 64
    checks = {
        "block_hashes": lambda v: isinstance(v, list) and all(hash_ok(h) for h in v),
        "parent_block_hash": opt(hash_ok),
        "token_ids": int_list,
        "block_size": is_int,
        "lora_id": opt(is_int),
        "medium": opt(lambda v: isinstance(v, str)),
        "lora_name": opt(lambda v: isinstance(v, str)),
        "group_idx": opt(is_int),
    }
    check = checks.get(name)
    if check is not None and not check(value):
        fail(f"field {name}: {value!r} has the wrong type")


ENCODING = None  # --encoding: "maps" or "arrays"


def decode_event(ev):
    if ENCODING is not None and not isinstance(ev, dict if ENCODING == "maps" else list):
        fail(f"event {ev!r} is not encoded as {ENCODING}")
    if isinstance(ev, dict):
        tag = ev.get("type")
        if tag not in FIELDS:
            fail(f"unknown or missing tag in {ev!r}")
        required, optional = FIELDS[tag]
        for name in required:
            if name not in ev:
                fail(f"{tag}: required field {name} missing")
        out = {"type": tag}
        for name in required + optional:
            if name in ev:
                check_type(name, ev[name])
                out[name] = ev[name]
        return out
    if isinstance(ev, list):
        if not ev or ev[0] not in FIELDS:
            fail(f"unknown or missing tag in {ev!r}")
        tag = ev[0]
        required, optional = FIELDS[tag]
        values = ev[1:]
        if not len(required) <= len(values) <= len(required) + len(optional):
            fail(f"{tag}: {len(values)} fields")
        out = {"type": tag}
        for name, value in zip(required + optional, values):
            check_type(name, value)
            out[name] = value
        return out
    fail(f"event {ev!r} is neither a map nor an array")


def decode_batch(payload):
    batch = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    if not isinstance(batch, list) or len(batch) not in (2, 3):
        fail(f"batch {batch!r}: want [ts, events, data_parallel_rank]")
    if type(batch[0]) is not float:
        fail(f"ts {batch[0]!r} is not a float")
    if not isinstance(batch[1], list):
        fail("events is not an array")
    if len(batch) == 3 and not (batch[2] is None or is_int(batch[2])):
        fail(f"data_parallel_rank {batch[2]!r}")
    return [decode_event(ev) for ev in batch[1]]


def main():
    global ENCODING
    args = sys.argv[1:]
    bind = args[:1] == ["--bind"]
    if bind:
        args = args[1:]
    if args[:1] == ["--encoding"]:
        ENCODING, args = args[1], args[2:]
    pub_endpoint, replay_endpoint, topic, count = args[:4]
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVTIMEO, 20000)
    sub.setsockopt_string(zmq.SUBSCRIBE, topic)
    if bind:
        sub.bind(pub_endpoint)
        print("ready", sub.getsockopt_string(zmq.LAST_ENDPOINT), flush=True)
    else:
        sub.connect(pub_endpoint)
        print("ready", flush=True)
    # libzmq sends a new connection its subscriptions only when this
    # thread uses the socket: it polls the socket, not only stdin, while
    # it waits for the count.
    count = None if count == "-" else int(count)
    poller = zmq.Poller()
    poller.register(sub, zmq.POLLIN)
    stdin = sys.stdin.fileno()  # poll reports a file by its descriptor
    if count is None:
        poller.register(stdin, zmq.POLLIN)

    live, decoded = [], []
    while count is None or len(live) < count:
        ready = dict(poller.poll(20000))
        if not ready:
            fail(f"nothing for 20s after {len(live)} batches")
        if count is None and stdin in ready:
            count = int(sys.stdin.readline())
            poller.unregister(stdin)
        if sub not in ready:
            continue
        frames = sub.recv_multipart()
        if len(frames) != 3:
            fail(f"{len(frames)} frames, want 3")
        got_topic, seq, payload = frames
        if got_topic != topic.encode():
            fail(f"topic {got_topic!r}")
        want_seq = len(live)
        if int.from_bytes(seq, "big") != want_seq or len(seq) != 8:
            fail(f"seq {seq.hex()}, want {want_seq}")
        live.append(payload)
        decoded.append(decode_batch(payload))
    if sub.poll(200):
        fail(f"a batch past the {count} expected")

    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.RCVTIMEO, 20000)
    dealer.connect(replay_endpoint)
    dealer.send_multipart([b"", (0).to_bytes(8, "big")])
    replayed = []
    while True:
        frames = dealer.recv_multipart()
        # vLLM's layout since v0.26.0: [b"", topic, seq, payload], and
        # [b"", b"", 0xFF*8, b""] at the end.
        if len(frames) != 4 or frames[0] != b"":
            fail(f"replay reply of {len(frames)} frames")
        if frames[2] == b"\xff" * 8:
            if frames[1] != b"" or frames[3] != b"":
                fail("end marker with a topic or a payload")
            break
        if frames[1] != topic.encode():
            fail(f"replayed topic {frames[1]!r}, want {topic!r}")
        replayed.append(frames[3])
    if replayed != live:
        fail(f"replay differs from the live payloads ({len(replayed)} vs {len(live)})")
    print(json.dumps(decoded), flush=True)


main()
