package names

import (
	"regexp"
	"strings"
	"testing"
)

// Valid and Pattern state the same rule.
func TestValidIsPattern(t *testing.T) {
	re := regexp.MustCompile(Pattern)
	for _, s := range []string{"", "a", "A1", "redis", "vllm.FakeConnector", "low-queue_filter", "1a", "-a", ".a", "_a",
		"a b", "a/b", "a\n", "é", "a\x00", "Ä", strings.Repeat("a", MaxLen), strings.Repeat("a", MaxLen+1)} {
		want := re.MatchString(s) && len(s) <= MaxLen
		if got := Valid(s); got != want {
			t.Errorf("Valid(%q) = %v; the pattern and length say %v", s, got, want)
		}
	}
}
