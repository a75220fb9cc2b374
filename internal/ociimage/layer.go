package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
)

// file is one regular file or directory of a layer.
type file struct {
	name string // without a leading slash
	mode int64  // permission bits, with the sticky bit
	dir  bool
	src  string // a regular file's content: the file at src, or data
	data []byte
}

// layer is a gzip-compressed tar of files, made deterministically.
type layer struct {
	blob   []byte        // the compressed tar
	diffID digest.Digest // the uncompressed tar's digest
}

// writeLayer writes files as a tar with every directory they need, sorted
// by name, owned by root (uid and gid 0, no names) and timestamped mtime,
// and compresses it with a fixed gzip header.
func writeLayer(files []file, mtime time.Time) (*layer, error) {
	all := map[string]file{}
	for _, f := range files {
		all[f.name] = f
		for d := path.Dir(f.name); d != "." && d != "/"; d = path.Dir(d) {
			if _, ok := all[d]; !ok {
				all[d] = file{name: d, dir: true, mode: 0o755}
			}
		}
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)

	var blob bytes.Buffer
	// BestSpeed, as go-containerregistry and ko compress layers: on a Go
	// binary it is three to four times faster than the default level, for
	// a layer some 6% larger.
	zw, err := gzip.NewWriterLevel(&blob, gzip.BestSpeed)
	if err != nil {
		return nil, err
	}
	// The header's name, comment and time stay empty, and its OS byte is
	// the one compress/gzip always writes.
	sum := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(zw, sum))
	mtime = mtime.UTC().Truncate(time.Second)
	for _, n := range names {
		f := all[n]
		h := &tar.Header{Name: n, Mode: f.mode, ModTime: mtime}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, n+"/"
			if err := tw.WriteHeader(h); err != nil {
				return nil, err
			}
			continue
		}
		h.Typeflag = tar.TypeReg
		var r io.Reader = bytes.NewReader(f.data)
		h.Size = int64(len(f.data))
		if f.src != "" {
			src, err := os.Open(f.src)
			if err != nil {
				return nil, err
			}
			defer src.Close()
			fi, err := src.Stat()
			if err != nil {
				return nil, err
			}
			r, h.Size = src, fi.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := io.Copy(tw, r); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return &layer{blob: blob.Bytes(), diffID: digest.NewDigestFromBytes(digest.SHA256, sum.Sum(nil))}, nil
}

// cleanPath is an absolute path in an image, as a tar entry names it.
func cleanPath(p string) string {
	return strings.TrimPrefix(path.Clean("/"+p), "/")
}
