// Package suggest finds the candidates nearest to a misspelt name, so that
// errors can say "did you mean ...?", and quotes such names for those errors.
//
// Names come from manifests, transfer configs and command lines, which may be
// hostile: the work done for a name and the length of its quoted form are
// bounded however long the name is.
package suggest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxName is the longest name Nearest looks for candidates for. Nothing a
// person misspells is longer, and the edit distance costs time in
// proportion to the name's length.
const MaxName = 256

// Nearest returns up to n candidates closest to name by edit distance,
// nearest first and alphabetical among equals. Candidates further than about
// a third of the name's length are left out: a suggestion that shares nothing
// with the input only adds noise.
//
// A name longer than MaxName has no candidates.
func Nearest(name string, candidates []string, n int) []string {
	if len(name) > MaxName {
		return nil
	}
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
		lc := strings.ToLower(c)
		prefix := strings.HasPrefix(lc, lower) && len(lower) >= 3
		if !prefix && abs(len(lc)-len(lower)) > limit {
			continue // the distance is at least the difference in length
		}
		if d := Distance(lower, lc); d <= limit || prefix {
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

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// MaxShown is how many bytes of a long input a message repeats.
const MaxShown = 64

// Shorten returns s for an error message: as it is when short, else its
// first MaxShown bytes, cut at a character boundary, and its length. An
// error must not echo a hundred megabytes back.
func Shorten(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	return s[:cut(s)] + fmt.Sprintf("... (%d bytes)", len(s))
}

// Quote returns s as a Go string literal for an error message, as %q would,
// shortened as Shorten does.
func Quote(s string) string {
	if len(s) <= MaxShown {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:cut(s)]) + fmt.Sprintf("... (%d bytes)", len(s))
}

// cut returns where Shorten cuts s: at MaxShown bytes or the character
// boundary before.
func cut(s string) int {
	n := MaxShown
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return n
}

// maxPath is the longest path the system takes (PATH_MAX on Linux); a
// message shows a longer one cut short.
const maxPath = 4096

// QuotePath shows a file path in a message, as a Go string literal: a name
// in it cannot end the line or hide what it is. Paths are shown whole up
// to maxPath bytes, since a path cut short is of no use.
func QuotePath(p string) string {
	if len(p) > maxPath {
		return Quote(p)
	}
	return strconv.Quote(p)
}

// Show is how a message or a listing shows a string from outside kvgen (a
// path, a name, what a binary says): as it is when it is plain, printable
// text that needs no quotes (no quote, backslash, space at either end or
// control character, at most 4096 bytes), else quoted as QuotePath does.
// Listings stay readable, and nothing shown can end a line, move the cursor
// or reorder a terminal's text.
func Show(s string) string {
	if s == "" || len(s) > maxPath || s[0] == ' ' || s[len(s)-1] == ' ' {
		return QuotePath(s)
	}
	for _, r := range s {
		if r == utf8.RuneError || r == '"' || r == '\\' || !strconv.IsPrint(r) {
			return QuotePath(s)
		}
	}
	return s
}
