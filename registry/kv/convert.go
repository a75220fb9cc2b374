package kv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/kvgen/kvgen/internal/suggest"
)

// The conversions below are the ones vLLM's config validation (pydantic, in
// its default lax mode, reading the JSON of --kv-transfer-config) applies,
// so that a value vLLM accepts means the same here: an integer may be
// written as a whole number (14579.0), a string ("14579", "1_000", "2.0")
// or a bool; a float as a number, a string ("1e9") or a bool; a bool as
// true/false, 0/1 or one of pydantic's words ("True", "yes", "off"...). A
// string is only a JSON string: vLLM turns no number into a string.

// isNull reports whether v is JSON null.
func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// optionalString decodes a string that vLLM allows to be null; null leaves
// dst as it is.
func optionalString(key string, v json.RawMessage, dst *string) error {
	if isNull(v) {
		return nil
	}
	return laxString(key, v, dst)
}

// laxString decodes a JSON string, the only form vLLM accepts for a str.
func laxString(key string, v json.RawMessage, dst *string) error {
	var s string
	if isNull(v) || json.Unmarshal(v, &s) != nil {
		return fmt.Errorf("%s %s: want a string", key, shortJSON(v))
	}
	*dst = s
	return nil
}

// laxInt decodes an integer the way vLLM does.
func laxInt(key string, v json.RawMessage, dst *int) error {
	n, ok := parseLaxInt(v)
	if !ok {
		return fmt.Errorf("%s %s: want an integer", key, shortJSON(v))
	}
	*dst = n
	return nil
}

func parseLaxInt(v json.RawMessage) (int, bool) {
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if dec.Decode(&x) != nil {
		return 0, false
	}
	switch x := x.(type) {
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 0); err == nil {
			return int(n), true
		}
		return wholeFloat(string(x))
	case string:
		s := strings.TrimSpace(x)
		if !digitUnderscores(s) {
			return 0, false
		}
		s = strings.ReplaceAll(s, "_", "")
		// "2.0" and "2." are integers to pydantic; "2.5" is not.
		if i := strings.IndexByte(s, '.'); i >= 0 {
			if strings.Trim(s[i+1:], "0") != "" {
				return 0, false
			}
			s = s[:i]
		}
		n, err := strconv.ParseInt(s, 10, 0)
		return int(n), err == nil
	}
	return 0, false
}

// wholeFloat parses a JSON number such as 14579.0 or 1e3 that is a whole
// number within int's range.
func wholeFloat(s string) (int, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int(f), true
}

// digitUnderscores reports whether s is an optionally signed decimal whose
// underscores each stand between two digits, as Python writes 1_000.
func digitUnderscores(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	if s == "" || s[0] == '_' || s[len(s)-1] == '_' || strings.Contains(s, "__") {
		return false
	}
	for _, r := range s {
		if (r < '0' || r > '9') && r != '_' && r != '.' {
			return false
		}
	}
	return strings.Count(s, ".") <= 1 && !strings.Contains(s, "_.") && !strings.Contains(s, "._")
}

// laxFloat decodes a float the way vLLM does.
func laxFloat(key string, v json.RawMessage, dst *float64) error {
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	err := dec.Decode(&x)
	var f float64
	ok := err == nil
	if ok {
		switch x := x.(type) {
		case bool:
			if x {
				f = 1
			}
		case json.Number:
			f, err = strconv.ParseFloat(string(x), 64)
			ok = err == nil
		case string:
			s := strings.TrimSpace(x)
			// Go would also read hexadecimal floats; Python does not.
			ok = !strings.ContainsAny(s, "xX_")
			if ok {
				f, err = strconv.ParseFloat(s, 64)
				ok = err == nil
			}
		default:
			ok = false
		}
	}
	if !ok {
		return fmt.Errorf("%s %s: want a number", key, shortJSON(v))
	}
	*dst = f
	return nil
}

// laxBool decodes a bool the way vLLM does.
func laxBool(key string, v json.RawMessage, dst *bool) error {
	var x any
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.UseNumber()
	if dec.Decode(&x) == nil {
		switch x := x.(type) {
		case bool:
			*dst = x
			return nil
		case json.Number:
			if f, err := x.Float64(); err == nil && (f == 0 || f == 1) {
				*dst = f == 1
				return nil
			}
		case string:
			switch strings.ToLower(x) {
			case "1", "on", "t", "true", "y", "yes":
				*dst = true
				return nil
			case "0", "off", "f", "false", "n", "no":
				*dst = false
				return nil
			}
		}
	}
	return fmt.Errorf("%s %s: want true or false", key, shortJSON(v))
}

// Quote returns s for an error message as a Go string literal, as %q
// would, and a long s as its first 64 bytes and its length. Connectors
// quote with it every string that comes from a config, a request or a
// store, so that no control character (an escape sequence, a newline)
// reaches a terminal or forges a line of a log, and no value floods one.
func Quote(s string) string { return suggest.Quote(s) }

// quoted returns s as a JSON string for a message, cut short if long.
func quoted(s string) string {
	b, _ := json.Marshal(s) // a string always marshals
	return shortJSON(b)
}

// shortJSON returns v for a message, compacted and cut short if long, so
// that a hostile value cannot flood a log, with every character that is
// not printable escaped: JSON strings may hold DEL, C1 controls such as
// U+009B (a terminal's CSI) and bidirectional overrides as they are.
func shortJSON(v json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		b.Reset()
		b.Write(bytes.TrimSpace(v))
	}
	return printable(suggest.Shorten(b.String()))
}

// printable returns s with each character that is not printable, and each
// byte that is not UTF-8, escaped as strconv.Quote escapes it.
func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case !strconv.IsPrint(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
