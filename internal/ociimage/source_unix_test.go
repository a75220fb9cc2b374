//go:build unix

package ociimage

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// B10: a FIFO where a layout's index.json, oci-layout or blob should be,
// or a FIFO named as a docker archive, is an error at once: nothing waits
// for a writer that never comes.
func TestFIFOsAreRefusedAtOnce(t *testing.T) {
	fifo := func(t *testing.T, path string) {
		t.Helper()
		require.NoError(t, os.Remove(path))
		require.NoError(t, syscall.Mkfifo(path, 0o644))
	}
	layoutWith := func(t *testing.T, name func(dir string) string) string {
		dir := writtenLayout(t)
		fifo(t, name(dir))
		return "oci:" + dir + ":t"
	}
	img := image(t)
	for name, ref := range map[string]func(t *testing.T) string{
		"index.json": func(t *testing.T) string {
			return layoutWith(t, func(dir string) string { return filepath.Join(dir, "index.json") })
		},
		"oci-layout": func(t *testing.T) string {
			return layoutWith(t, func(dir string) string { return filepath.Join(dir, "oci-layout") })
		},
		"manifest": func(t *testing.T) string {
			return layoutWith(t, func(dir string) string { return blobFile(dir, img.Platforms[0].Manifest) })
		},
		"archive": func(t *testing.T) string {
			path := filepath.Join(t.TempDir(), "img.tar")
			require.NoError(t, os.WriteFile(path, nil, 0o644))
			fifo(t, path)
			return "docker-archive:" + path
		},
	} {
		t.Run(name, func(t *testing.T) {
			r := ref(t)
			done := make(chan error, 1)
			go func() {
				done <- inspectErr(t, r, Remote{}, false)
			}()
			select {
			case err := <-done:
				require.ErrorContains(t, err, "is not a regular file but a FIFO")
			case <-time.After(20 * time.Second):
				t.Fatal("inspect waits on the FIFO")
			}
		})
	}
}

// B5: a destination whose index.json is a FIFO is an error at once, and
// the FIFO stays.
func TestLayoutDestinationIndexFIFO(t *testing.T) {
	dir := writtenLayout(t)
	index := filepath.Join(dir, "index.json")
	require.NoError(t, os.Remove(index))
	require.NoError(t, syscall.Mkfifo(index, 0o644))
	done := make(chan error, 1)
	go func() { done <- Write(context.Background(), image(t), must(ParseRef("oci:"+dir+":t")), Remote{}) }()
	select {
	case err := <-done:
		require.ErrorContains(t, err, "is not a regular file but a FIFO")
	case <-time.After(20 * time.Second):
		t.Fatal("the build waits on the FIFO")
	}
	fi, err := os.Lstat(index)
	require.NoError(t, err)
	require.NotZero(t, fi.Mode()&os.ModeNamedPipe)
}
