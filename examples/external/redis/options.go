package redis

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/kvgen/kvgen/registry/kv"
)

// Options are the connector's settings, read from kv_connector_extra_config.
// A key that names no field is an error that names the nearest field.
type Options struct {
	// Addrs are the addresses of the server: host:port, redis://host:port,
	// or rediss://host:port for TLS. One address is a single server unless
	// Cluster is set; several are the seed nodes of a Redis Cluster, or the
	// sentinels when MasterName is set.
	Addrs []string `json:"addrs" min:"1" max:"1000"`
	// Cluster makes the connector a Redis Cluster client even with one
	// seed address (a cluster's configuration endpoint, or any one node).
	Cluster bool `json:"cluster"`
	// TLS, when set, encrypts connections and checks the server's
	// certificate; rediss:// addresses turn it on with its defaults.
	TLS *TLSOptions `json:"tls"`
	// MasterName is the name of the Sentinel master; empty means no Sentinel.
	MasterName string `json:"master_name"`
	// DB is the database to select (single server and Sentinel only).
	DB int `json:"db" min:"0" max:"2147483647"`
	// Username and Password authenticate with ACLs or requirepass.
	Username string `json:"username"`
	Password string `json:"password"`
	// KeyPrefix starts every key the connector writes. Engines that share
	// KV must use the same prefix. Keys already differ by model, so
	// several models may share one prefix.
	KeyPrefix string `json:"key_prefix" max:"1024"`
	// TTL is how long a stored layer lives; 0 keeps it until Redis evicts it.
	TTL kv.Duration `json:"ttl"`
	// PoolSize is the number of connections per server; 0 is go-redis'
	// default of ten per CPU. go-redis allocates for the whole pool at
	// once, hence the bound.
	PoolSize int `json:"pool_size" min:"0" max:"10000"`
	// DialTimeout bounds connecting, and the reachability check in New.
	DialTimeout kv.Duration `json:"dial_timeout" min:"1ms" max:"1h"`
	// ReadTimeout and WriteTimeout bound each socket read and write; the
	// deadline of a call's context applies too.
	ReadTimeout  kv.Duration `json:"read_timeout" min:"1ms" max:"1h"`
	WriteTimeout kv.Duration `json:"write_timeout" min:"1ms" max:"1h"`
	// KeyspaceEvents says how removals are learnt while events are
	// reported: "auto" follows every primary's keyspace notifications,
	// turning on the classes they need (Egxe) with CONFIG SET where they
	// are off; "assume" follows them without CONFIG, for servers that
	// refuse it and whose operator set them; "off" follows none, and the
	// events are store-only.
	KeyspaceEvents string `json:"keyspace_events"`
	// MaxLayerBytes bounds one layer's KV: a larger save is an error, and a
	// stored value that holds more is a miss, read no further than the
	// bound (other clients of the server may write the keys). By default
	// and at most, Redis' largest string (512 MiB) less 64 KiB for the
	// value's header.
	MaxLayerBytes int64 `json:"max_layer_bytes" min:"1" max:"536805376"`
	// MaxBytesPerToken bounds one layer's KV by its tokens: a layer of n
	// tokens holds at most n times this, and a load reads no more, since a
	// value's checksum is no bound on its size. 128 KiB by default.
	MaxBytesPerToken int64 `json:"max_bytes_per_token" min:"1" max:"1073741824"`
}

// TLSOptions are the TLS settings (the "tls" object).
type TLSOptions struct {
	// CAFile is a PEM file of the CAs that sign the server's certificate;
	// empty means the system's roots.
	CAFile string `json:"ca_file"`
	// CertFile and KeyFile are a PEM client certificate and its key, for
	// servers that ask for one (tls-auth-clients); both or neither.
	CertFile string `json:"cert_file"`
	KeyFile  string `json:"key_file"`
	// ServerName is the name the server's certificate must carry; empty
	// means the host of each address.
	ServerName string `json:"server_name"`
}

// DefaultOptions returns the settings that apply where
// kv_connector_extra_config says nothing.
func DefaultOptions() Options {
	return Options{
		Addrs:          []string{"127.0.0.1:6379"},
		KeyPrefix:      "kvgen:",
		DialTimeout:    kv.Duration(5 * time.Second),
		ReadTimeout:    kv.Duration(3 * time.Second),
		WriteTimeout:   kv.Duration(3 * time.Second),
		KeyspaceEvents: keyspaceAuto,
		// As the filesystem connector's: twice a token's KV in one layer
		// of 64 heads of 128 dimensions in 32 bits.
		MaxLayerBytes:    512<<20 - 64<<10,
		MaxBytesPerToken: 128 << 10,
	}
}

// decodeOptions reads the settings from extra over the defaults and checks
// them, reporting every problem at once (up to kv.MaxProblems).
func decodeOptions(extra map[string]any) (Options, error) {
	opts := DefaultOptions()
	if err := kv.DecodeExtra(extra, &opts); err != nil {
		return Options{}, err
	}
	if t, ok := extra["tls"].(map[string]any); ok {
		// DecodeExtra checks the top level's keys only; the tls object's
		// keys are checked the same way, and named by their path.
		var tlsOpts TLSOptions
		if err := kv.DecodeExtra(t, &tlsOpts); err != nil {
			return Options{}, errors.New(strings.ReplaceAll(err.Error(),
				"kv_connector_extra_config: ", "kv_connector_extra_config: tls: "))
		}
		opts.TLS = &tlsOpts
	}
	var problems kv.Problems
	bad := func(format string, args ...any) {
		problems.Add(fmt.Errorf("kv_connector_extra_config: "+format, args...))
	}
	schemes := map[string]bool{}
	for i, a := range opts.Addrs {
		if strings.TrimSpace(a) == "" {
			bad("addrs[%d] is empty", i)
			continue
		}
		addr, scheme, err := parseAddr(a)
		if err != nil {
			bad("addrs[%d] %s: %v", i, kv.Quote(a), err)
			continue
		}
		opts.Addrs[i] = addr
		schemes[scheme] = true
	}
	if schemes["redis"] && schemes["rediss"] {
		bad("addrs: redis:// and rediss:// addresses mixed; use rediss:// (or the tls setting) for all of them")
	}
	if schemes["rediss"] && opts.TLS == nil {
		opts.TLS = &TLSOptions{}
	}
	if opts.TLS != nil {
		if (opts.TLS.CertFile == "") != (opts.TLS.KeyFile == "") {
			bad("tls: cert_file and key_file go together: set both for a client certificate, or neither")
		}
	}
	switch opts.KeyspaceEvents {
	case keyspaceAuto, keyspaceAssume, keyspaceOff:
	default:
		bad("keyspace_events %s: want %q, %q or %q", kv.Quote(opts.KeyspaceEvents), keyspaceAuto, keyspaceAssume, keyspaceOff)
	}
	// Redis Cluster hashes a key by its first braces: a brace in the
	// prefix would take the place of the prefix hash's hash tag, and a
	// prefix's keys would no longer share a slot (or every key would
	// share one node).
	if strings.ContainsAny(opts.KeyPrefix, "{}") {
		bad("key_prefix %s: holds a brace; the connector's keys put the prefix hash in braces, as a Redis Cluster hash tag, which a brace in key_prefix would break", kv.Quote(opts.KeyPrefix))
	}
	if opts.Cluster && opts.MasterName != "" {
		bad("cluster and master_name: a Sentinel-managed master is not a Redis Cluster; set one of them")
	}
	if opts.DB != 0 && opts.Cluster {
		bad("db %d: a Redis Cluster has only database 0", opts.DB)
	}
	if opts.DB != 0 && !opts.Cluster && opts.MasterName == "" && len(opts.Addrs) > 1 {
		bad("db %d: a Redis Cluster (several addrs without master_name) has only database 0", opts.DB)
	}
	// Redis expiries have millisecond resolution: a shorter TTL would
	// silently become no expiry at all.
	if opts.TTL < 0 || (opts.TTL > 0 && time.Duration(opts.TTL) < time.Millisecond) {
		bad("ttl %s: want at least 1ms, or 0 for no expiry", opts.TTL)
	}
	if err := problems.Err(); err != nil {
		return Options{}, err
	}
	return opts, nil
}

// isCluster reports whether opts name a Redis Cluster: explicitly, or by
// several addresses without a Sentinel master.
func (o Options) isCluster() bool {
	return o.Cluster || (o.MasterName == "" && len(o.Addrs) > 1)
}

// parseAddr checks one entry of addrs and returns its host:port and its
// scheme ("" for a bare host:port).
func parseAddr(a string) (addr, scheme string, err error) {
	addr = a
	if strings.Contains(a, "://") {
		u, err := url.Parse(a)
		if err != nil {
			return "", "", errors.New("not a URL")
		}
		if u.Scheme != "redis" && u.Scheme != "rediss" {
			return "", "", fmt.Errorf("scheme %s: want redis:// or rediss://", kv.Quote(u.Scheme))
		}
		if u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
			return "", "", errors.New("want only scheme, host and port; credentials, database and options go in username, password, db and the other settings")
		}
		addr, scheme = u.Host, u.Scheme
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || strings.IndexFunc(host, notPrint) >= 0 {
		// No host name holds a control character; the address is shown
		// in every error of the connector.
		return "", "", errors.New("want host:port")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", "", fmt.Errorf("port %s: want 1 to 65535", kv.Quote(port))
	}
	return addr, scheme, nil
}

// notPrint reports whether r is a control or other non-printing character.
func notPrint(r rune) bool { return !strconv.IsPrint(r) }
