package suggest

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestDistance(t *testing.T) {
	assert.Equal(t, 0, Distance("redis", "redis"))
	assert.Equal(t, 1, Distance("redis", "rediss"))
	assert.Equal(t, 3, Distance("kitten", "sitting"))
	assert.Equal(t, 5, Distance("", "hello"))
}

func TestNearest(t *testing.T) {
	names := []string{"filesystem", "memory", "redis", "LMCacheConnectorV1", "ExampleConnector"}
	assert.Equal(t, []string{"filesystem"}, Nearest("filesytem", names, 3))
	assert.Equal(t, []string{"redis"}, Nearest("Redis", names, 3))
	assert.Equal(t, []string{"LMCacheConnectorV1"}, Nearest("LMCacheConnector", names, 3))
	assert.Empty(t, Nearest("zzzzzz", names, 3))
	assert.Len(t, Nearest("e", []string{"a", "b", "c", "d"}, 2), 2, "n caps the result")
}
