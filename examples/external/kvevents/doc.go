// Package kvevents publishes kvgen's KV events ([kv.KVEvent]) on vLLM's
// wire, so that routers that read vLLM's KV cache events over ZeroMQ
// (llm-d's KV cache indexer, NVIDIA Dynamo, AIBrix, kthena) can read a
// kvgen host's too.
//
// It is configured as vLLM's --kv-events-config is ([Parse]) and sends
// what vLLM's ZmqEventPublisher sends (vllm/distributed/kv_events.py):
// on a PUB socket, messages of three frames [topic, seq, payload], seq an
// 8-byte big-endian count of batches from 0 and payload a msgpack
// KVEventBatch [ts, events, data_parallel_rank]; on an optional ROUTER
// socket, the latest batches again from a sequence number a subscriber
// asks for.
//
// It speaks the ZeroMQ transport protocol (ZMTP 3.x, NULL mechanism)
// itself, with every queue and every read from a peer bounded; see
// README.md.
package kvevents
