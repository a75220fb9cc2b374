package suggest

import (
	"strconv"
	"strings"
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

func TestNearestLongNameHasNoCandidates(t *testing.T) {
	long := strings.Repeat("a", MaxName+1)
	assert.Empty(t, Nearest(long, []string{long[:MaxName], long + "b"}, 3), "a name past MaxName gets no suggestions")
	assert.Equal(t, []string{long[:MaxName-1] + "b"}, Nearest(long[:MaxName], []string{long[:MaxName-1] + "b"}, 3))
}

func TestNearestSkipsCandidatesTooFarInLength(t *testing.T) {
	// The length filter must not drop a candidate that starts with the name.
	assert.Equal(t, []string{"LMCacheConnectorV1"}, Nearest("LMC", []string{"LMCacheConnectorV1"}, 3))
	assert.Empty(t, Nearest("ab", []string{"abcdefgh"}, 3))
}

func TestQuote(t *testing.T) {
	assert.Equal(t, `"redis"`, Quote("redis"))
	assert.Equal(t, `"a\u202eb\n"`, Quote("a\u202eb\n"), "control characters are escaped as %q does")

	long := strings.Repeat("x", 100<<20)
	q := Quote(long)
	assert.Less(t, len(q), 100, "a long name is shortened: %s", q)
	assert.Equal(t, `"`+strings.Repeat("x", 64)+`"... (104857600 bytes)`, q)

	// A cut inside a multi-byte character keeps the whole character out.
	q = Quote(strings.Repeat("x", 63) + strings.Repeat("é", 10))
	assert.Equal(t, `"`+strings.Repeat("x", 63)+`"... (83 bytes)`, q)
}

func TestShorten(t *testing.T) {
	assert.Equal(t, "a\nb", Shorten("a\nb"), "a short input is kept as it is")
	s := strings.Repeat("é", 40) // 80 bytes; byte 64 starts a character
	assert.Equal(t, strings.Repeat("é", 32)+"... (80 bytes)", Shorten(s))
	s = "x" + s // byte 64 is inside a character
	assert.Equal(t, "x"+strings.Repeat("é", 31)+"... (81 bytes)", Shorten(s))
}

// BenchmarkNearestLongName compares Nearest with the work it did before it
// was bounded: the edit distance from the whole name to every candidate.
// Both variants run for each name length in one run.
func BenchmarkNearestLongName(b *testing.B) {
	names := []string{"filesystem", "memory", "redis", "LMCacheConnectorV1", "ExampleConnector"}
	for _, size := range []int{16, 1 << 10, 1 << 20} {
		name := strings.Repeat("k", size)
		b.Run("bounded/"+strconv.Itoa(size), func(b *testing.B) {
			n := 0
			for b.Loop() {
				n += len(Nearest(name, names, 3))
			}
			sink = n
		})
		b.Run("unbounded/"+strconv.Itoa(size), func(b *testing.B) {
			n := 0
			for b.Loop() {
				lower := strings.ToLower(name)
				for _, c := range names {
					n += Distance(lower, strings.ToLower(c))
				}
			}
			sink = n
		})
	}
}

var sink int

// Show leaves plain text as it is and quotes anything a terminal would
// act on, or that quotes would hide.
func TestShow(t *testing.T) {
	for _, s := range []string{"bin/plain", "connectors.yaml", "github.com/kvgen/kvgen@v0.1.0", "h1:abc+/=", "a b", "é"} {
		assert.Equal(t, s, Show(s))
	}
	for s, want := range map[string]string{
		"":                        `""`,
		" x":                      `" x"`,
		"x\x1b[31m\nkvgen: fake":  `"x\x1b[31m\nkvgen: fake"`,
		"a\u202eb":                `"a\u202eb"`,
		"q\"":                     `"q\""`,
		`back\slash`:              `"back\\slash"`,
		"\xff":                    `"\xff"`,
		strings.Repeat("x", 5000): Quote(strings.Repeat("x", 5000)),
	} {
		assert.Equal(t, want, Show(s))
	}
}
