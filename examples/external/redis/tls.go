package redis

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/kvgen/kvgen/registry/kv"
)

// config returns the crypto/tls configuration o describes; nil o means no
// TLS. Files are read here, at start-up, so a wrong path is an error of
// New rather than of the first request.
func (o *TLSOptions) config() (*tls.Config, error) {
	if o == nil {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: o.ServerName}
	var problems kv.Problems
	bad := func(format string, args ...any) {
		problems.Add(fmt.Errorf("kv_connector_extra_config: tls: "+format, args...))
	}
	if o.CAFile != "" {
		pem, err := readPEM(o.CAFile)
		switch {
		case err != nil:
			bad("ca_file: %v", err)
		default:
			conf.RootCAs = x509.NewCertPool()
			if !conf.RootCAs.AppendCertsFromPEM(pem) {
				bad("ca_file %q: no PEM certificate in it", o.CAFile)
			}
		}
	}
	if o.CertFile != "" && o.KeyFile != "" {
		certPEM, err := readPEM(o.CertFile)
		if err != nil {
			bad("cert_file: %v", err)
		}
		keyPEM, kerr := readPEM(o.KeyFile)
		if kerr != nil {
			bad("key_file: %v", kerr)
		}
		if err == nil && kerr == nil {
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				bad("cert_file and key_file: %v", err)
			} else {
				conf.Certificates = []tls.Certificate{cert}
			}
		}
	}
	if err := problems.Err(); err != nil {
		return nil, err
	}
	return conf, nil
}

// maxPEM bounds a certificate or key file: a system's whole CA bundle is a
// few hundred KB.
const maxPEM = 4 << 20

// readPEM reads a PEM file named by the settings, which are not trusted:
// only a regular file, opened without blocking (a FIFO would hang New),
// and at most maxPEM bytes of it (/dev/zero would never end).
func readPEM(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	var pe *fs.PathError
	if errors.As(err, &pe) { // the path quoted, as everywhere in messages
		return nil, fmt.Errorf("%s %s: %w", pe.Op, kv.Quote(path), pe.Err)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file", kv.Quote(path))
	}
	data, err := io.ReadAll(io.LimitReader(f, maxPEM+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPEM {
		return nil, fmt.Errorf("%s: more than %d bytes: want a PEM file", kv.Quote(path), maxPEM)
	}
	return data, nil
}
