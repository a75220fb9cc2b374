// Package names states once the rule a plugin's name and aliases follow:
// manifests check it and their JSON Schema publishes it
// (internal/manifest), and package kv's errors follow it when they show a
// manifest line to add.
package names

// Pattern is the rule as a regular expression: a letter, then letters,
// digits, dots, dashes and underscores.
const Pattern = `^[A-Za-z][A-Za-z0-9_.-]*$`

// MaxLen is the longest name, in bytes.
const MaxLen = 128

// Valid reports whether s follows the rule: it matches Pattern and is at
// most MaxLen bytes.
func Valid(s string) bool {
	if s == "" || len(s) > MaxLen || !isLetter(s[0]) {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !isLetter(c) && (c < '0' || c > '9') && c != '_' && c != '.' && c != '-' {
			return false
		}
	}
	return true
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }
