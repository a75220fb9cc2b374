package redis

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/kvgen/kvgen/registry"
)

// Options are the connector's settings, read from kv_connector_extra_config.
// A key that names no field is an error that names the nearest field.
type Options struct {
	// Addrs are the host:port addresses of the server. One address is a
	// single server; several are the seed nodes of a Redis Cluster, or the
	// sentinels when MasterName is set.
	Addrs []string `json:"addrs"`
	// MasterName is the name of the Sentinel master; empty means no Sentinel.
	MasterName string `json:"master_name"`
	// DB is the database to select (single server and Sentinel only).
	DB int `json:"db"`
	// Username and Password authenticate with ACLs or requirepass.
	Username string `json:"username"`
	Password string `json:"password"`
	// KeyPrefix starts every key the connector writes. Engines that share
	// KV must use the same prefix. Keys already differ by model, so
	// several models may share one prefix.
	KeyPrefix string `json:"key_prefix"`
	// TTL is how long a stored layer lives; 0 keeps it until Redis evicts it.
	TTL registry.Duration `json:"ttl"`
	// PoolSize is the number of connections per server; 0 is go-redis'
	// default of ten per CPU.
	PoolSize int `json:"pool_size"`
	// DialTimeout bounds connecting, and the reachability check in New.
	DialTimeout registry.Duration `json:"dial_timeout"`
	// ReadTimeout and WriteTimeout bound each socket read and write; the
	// deadline of a call's context applies too.
	ReadTimeout  registry.Duration `json:"read_timeout"`
	WriteTimeout registry.Duration `json:"write_timeout"`
}

// DefaultOptions returns the settings that apply where
// kv_connector_extra_config says nothing.
func DefaultOptions() Options {
	return Options{
		Addrs:        []string{"127.0.0.1:6379"},
		KeyPrefix:    "kvgen:",
		DialTimeout:  registry.Duration(5 * time.Second),
		ReadTimeout:  registry.Duration(3 * time.Second),
		WriteTimeout: registry.Duration(3 * time.Second),
	}
}

// decodeOptions reads the settings from extra over the defaults and checks
// them, reporting every problem at once.
func decodeOptions(extra map[string]any) (Options, error) {
	opts := DefaultOptions()
	if err := registry.DecodeExtra(extra, &opts); err != nil {
		return Options{}, err
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("kv_connector_extra_config: "+format, args...))
	}
	if len(opts.Addrs) == 0 {
		bad("addrs: want at least one host:port address")
	}
	for i, a := range opts.Addrs {
		if strings.TrimSpace(a) == "" {
			bad("addrs[%d] is empty", i)
		}
	}
	if opts.DB < 0 {
		bad("db %d: want 0 or more", opts.DB)
	}
	if opts.DB != 0 && opts.MasterName == "" && len(opts.Addrs) > 1 {
		bad("db %d: a Redis Cluster (several addrs without master_name) has only database 0", opts.DB)
	}
	if opts.PoolSize < 0 {
		bad("pool_size %d: want 0 (the default) or more", opts.PoolSize)
	}
	// Redis expiries have millisecond resolution: a shorter TTL would
	// silently become no expiry at all.
	if opts.TTL < 0 || (opts.TTL > 0 && time.Duration(opts.TTL) < time.Millisecond) {
		bad("ttl %s: want at least 1ms, or 0 for no expiry", opts.TTL)
	}
	for _, d := range []struct {
		key string
		val registry.Duration
	}{
		{"dial_timeout", opts.DialTimeout},
		{"read_timeout", opts.ReadTimeout},
		{"write_timeout", opts.WriteTimeout},
	} {
		if d.val <= 0 {
			bad("%s %s: want a positive duration", d.key, d.val)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return Options{}, err
	}
	return opts, nil
}
