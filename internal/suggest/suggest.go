// Package suggest finds the candidates nearest to a misspelt name, so that
// errors can say "did you mean ...?".
package suggest

import (
	"slices"
	"strings"
)

// Nearest returns up to n candidates closest to name by edit distance,
// nearest first and alphabetical among equals. Candidates further than about
// a third of the name's length are left out: a suggestion that shares nothing
// with the input only adds noise.
func Nearest(name string, candidates []string, n int) []string {
	type scored struct {
		s string
		d int
	}
	limit := max(len(name)/3, 2)
	lower := strings.ToLower(name)
	var found []scored
	seen := make(map[string]bool, len(candidates))
	for _, c := range candidates {
		if seen[c] || c == name {
			continue
		}
		seen[c] = true
		d := Distance(lower, strings.ToLower(c))
		if d <= limit || strings.HasPrefix(strings.ToLower(c), lower) && len(lower) >= 3 {
			found = append(found, scored{c, d})
		}
	}
	slices.SortFunc(found, func(a, b scored) int {
		if a.d != b.d {
			return a.d - b.d
		}
		return strings.Compare(a.s, b.s)
	})
	if len(found) > n {
		found = found[:n]
	}
	out := make([]string, len(found))
	for i, f := range found {
		out[i] = f.s
	}
	return out
}

// Distance is the Levenshtein distance between a and b, counted in bytes.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
