package ociimage

import (
	"io"
	"strings"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A blob whose bytes are not what its descriptor says is an error by the
// end of the copy, so that it never replaces a layout's file.
func TestVerifiedRefusesAWrongBlob(t *testing.T) {
	good := "the blob"
	d := ocispec.Descriptor{Digest: digest.FromString(good), Size: int64(len(good))}

	data, err := io.ReadAll(verify(strings.NewReader(good), d))
	require.NoError(t, err)
	assert.Equal(t, good, string(data))

	_, err = io.ReadAll(verify(strings.NewReader("the blub"), d))
	assert.ErrorContains(t, err, "blob "+d.Digest.String()+": ", "same size, another digest, named")
}
