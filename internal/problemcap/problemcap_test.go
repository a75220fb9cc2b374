package problemcap

import "testing"

func TestMore(t *testing.T) {
	for n, want := range map[int]string{1: "... and 1 more problem", 2: "... and 2 more problems", 12345: "... and 12345 more problems"} {
		if got := More(n); got != want {
			t.Errorf("More(%d) = %q, want %q", n, got, want)
		}
	}
}
