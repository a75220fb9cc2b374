// Package redis is a kvgen KV connector that keeps KV in Redis, so that a
// prefill engine can save the KV of a prompt and a decode engine, or any
// later engine serving the same model, can load it instead of recomputing it.
//
// It lives in its own module, as a connector written outside kvgen does: a
// deployment manifest adds it with one entry naming its import path, and
// kvgen links it like any other connector. It speaks to a single server, a
// Redis Cluster or a Sentinel-managed master through go-redis.
//
// Every stored value carries a checksum and the identity of the key it was
// saved under; a load that finds anything else reports a miss, so the engine
// recomputes rather than using wrong KV.
package redis
