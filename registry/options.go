package registry

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DecodeExtra decodes a connector's extra settings (vLLM's
// kv_connector_extra_config) into dst, a pointer to a struct whose fields
// carry json tags. Fields missing from extra keep the values dst already
// holds, so set defaults before calling. Unlike vLLM, a key that no field
// accepts is an error that names the nearest valid key: a typo in a
// deployment's settings must not pass silently.
func DecodeExtra(extra map[string]any, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("registry.DecodeExtra: dst must be a non-nil pointer to a struct, not %T", dst)
	}
	if len(extra) == 0 {
		return nil
	}
	const what = "kv_connector_extra_config"
	keys := slices.Sorted(maps.Keys(extra))
	if err := checkKeys(what, keys, jsonKeys(rv.Elem().Interface())); err != nil {
		return err
	}
	// One key at a time, so that every error names its key: encoding/json
	// does not say where an UnmarshalJSON method (such as Duration's)
	// failed.
	var errs []error
	for _, k := range keys {
		data, err := json.Marshal(map[string]any{k: extra[k]})
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", what, k, err))
			continue
		}
		// Numbers stay json.Number where a field takes any value, so a
		// nested config loses no digits either.
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(rv.Interface()); err != nil {
			var te *json.UnmarshalTypeError
			if errors.As(err, &te) && te.Field != "" {
				err = jsonError(data, err) // already names the field
			} else {
				err = fmt.Errorf("%s: %w", k, err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", what, err))
		}
	}
	return errors.Join(errs...)
}

// jsonKeys lists the JSON keys a struct value accepts, following embedded
// structs the way encoding/json does.
func jsonKeys(v any) []string {
	var keys []string
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for f := range t.Fields() {
			tag := f.Tag.Get("json")
			name, _, _ := strings.Cut(tag, ",")
			if name == "-" && !strings.Contains(tag, ",") {
				continue
			}
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					walk(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			keys = append(keys, name)
		}
	}
	walk(reflect.TypeOf(v))
	return keys
}

// Duration is a time.Duration that JSON settings may write as a Go duration
// string ("250ms", "1h") or as a number of seconds, as Python configs do.
// null leaves the value as it is, as encoding/json does for other types. A
// duration too long for time.Duration (about 292 years), or one that is not
// zero but shorter than a nanosecond, is an error rather than a surprise.
type Duration time.Duration

// UnmarshalJSON accepts "1.5s", 1.5 or null.
func (d *Duration) UnmarshalJSON(b []byte) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		return nil
	case json.Number:
		p, err := secondsDuration(string(v))
		if err != nil {
			return fmt.Errorf("duration %s seconds: %w", shortJSON(b), err)
		}
		*d = Duration(p)
		return nil
	case string:
		p, err := time.ParseDuration(v)
		if err != nil {
			if strings.Contains(err.Error(), "invalid duration") && !strings.ContainsAny(v, " ") && validUnits(v) {
				return fmt.Errorf("duration %s: %w", shortJSON(b), errDurationRange)
			}
			return fmt.Errorf("duration %s: want a Go duration such as \"500ms\" or \"2s\", or a number of seconds", shortJSON(b))
		}
		if p == 0 && strings.ContainsAny(v, "123456789") {
			return fmt.Errorf("duration %s: %w", shortJSON(b), errDurationTiny)
		}
		*d = Duration(p)
		return nil
	}
	return fmt.Errorf("duration %s: want a string such as \"2s\" or a number of seconds", shortJSON(b))
}

var (
	errDurationRange = fmt.Errorf("out of range: want at most %s", time.Duration(math.MaxInt64))
	errDurationTiny  = errors.New("rounds to zero: want 0 or at least 1ns")
)

// secondsDuration converts a JSON number of seconds to a duration exactly,
// truncating below a nanosecond.
func secondsDuration(lit string) (time.Duration, error) {
	// A float64 first, to tell numbers far out of range, whose exact
	// value would be costly to compute, from those that need care.
	f, _ := strconv.ParseFloat(lit, 64)
	mantissa, _, _ := strings.Cut(strings.ToLower(lit), "e")
	switch {
	case math.Abs(f) >= 1e10: // beyond ±292 years
		return 0, errDurationRange
	case f == 0 && strings.ContainsAny(mantissa, "123456789"):
		return 0, errDurationTiny
	case f == 0:
		return 0, nil
	}
	r, ok := new(big.Rat).SetString(lit)
	if !ok {
		return 0, errors.New("not a number")
	}
	ns := new(big.Int).Quo(new(big.Int).Mul(r.Num(), big.NewInt(int64(time.Second))), r.Denom())
	if !ns.IsInt64() {
		return 0, errDurationRange
	}
	if ns.Sign() == 0 {
		return 0, errDurationTiny
	}
	return time.Duration(ns.Int64()), nil
}

// validUnits reports whether s is made only of numbers and Go's duration
// units, so that an "invalid duration" error means overflow.
func validUnits(s string) bool {
	s = strings.TrimLeft(s, "+-")
	if s == "" {
		return false
	}
	for s != "" {
		i := strings.IndexFunc(s, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
		if i <= 0 {
			return false
		}
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return (r >= '0' && r <= '9') || r == '.' })
		if j < 0 {
			j = len(s)
		}
		switch s[:j] {
		case "ns", "us", "µs", "μs", "ms", "s", "m", "h":
		default:
			return false
		}
		s = s[j:]
	}
	return true
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// String returns the duration as a Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }
