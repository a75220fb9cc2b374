package redis

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/kvgen/kvgen/registry"
)

// config returns the crypto/tls configuration o describes; nil o means no
// TLS. Files are read here, at start-up, so a wrong path is an error of
// New rather than of the first request.
func (o *TLSOptions) config() (*tls.Config, error) {
	if o == nil {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	var problems registry.Problems
	bad := func(format string, args ...any) {
		problems.Add(fmt.Errorf("kv_connector_extra_config: tls: "+format, args...))
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		switch {
		case err != nil:
			bad("ca_file: %v", err)
		default:
			conf.RootCAs = x509.NewCertPool()
			if !conf.RootCAs.AppendCertsFromPEM(pem) {
				bad("ca_file %s: no PEM certificate in it", o.CAFile)
			}
		}
	}
	if o.CertFile != "" && o.KeyFile != "" {
		cert, err := tls.LoadX509KeyPair(o.CertFile, o.KeyFile)
		if err != nil {
			bad("cert_file and key_file: %v", err)
		} else {
			conf.Certificates = []tls.Certificate{cert}
		}
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	return conf, nil
}
