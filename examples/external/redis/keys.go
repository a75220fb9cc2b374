package redis

import (
	"net/url"

	"github.com/kvgen/kvgen/registry/kv"
)

// The key layout is part of the connector's interface: operators inspect,
// expire and delete keys by it, and engines that share KV must agree on it.
// It uses neither the engine id nor the role, because a prefill engine saves
// what a decode engine with another id loads.
//
//	<key_prefix>{<prefix hash>}:<layer>   one layer's KV for one prefix
//	<key_prefix>{<prefix hash>}           marker: some layer of the prefix is stored
//
// The prefix hash is [kv.BlockHash] in hex, from [kv.Prefixes]:
// it covers the model (Config.Model), so engines of different models never
// share a key, even under one key_prefix. The braces are a Redis
// Cluster hash tag, so every key of a prefix lives in one slot: one EXISTS
// checks all its layers and one MULTI writes a layer with its marker. The
// layer name is path-escaped, which keeps keys printable.

// prefixKey returns the marker key of the prefix with hash h.
func (c *connector) prefixKey(h kv.BlockHash) string {
	return c.opts.KeyPrefix + "{" + h.String() + "}"
}

// layerKey returns the key of layer's KV for the prefix with hash h.
func (c *connector) layerKey(h kv.BlockHash, layer string) string {
	return c.prefixKey(h) + ":" + url.PathEscape(layer)
}
