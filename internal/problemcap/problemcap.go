// Package problemcap is the one rule for how many problems kvgen lists:
// the first Max of them, one a line, then a line that counts the rest.
// Both kvgen's diagnostics and the runtime registry's errors about a
// transfer config follow it; it imports only what those already link.
//
// Max is the cap's one name in kvgen's own code. The runtime exports it
// as kv.MaxProblems, defined as Max and kept because registry/kv's API only
// grows.
package problemcap

import "strconv"

// Max is how many problems a list shows. Like go/types, which stops at
// ten, it keeps a hostile input of thousands of mistakes from costing
// thousands of lines: a list is fixed from its first lines.
const Max = 10

// More is the line that stands for the n problems of a list past Max.
func More(n int) string {
	if n == 1 {
		return "... and 1 more problem"
	}
	return "... and " + strconv.Itoa(n) + " more problems"
}
