package kv

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
//
// A field may bound the values it accepts with min and max tags, which
// DecodeExtra checks for every key extra sets:
//
//	StaleTempSeconds int      `json:"stale_temp_seconds" min:"1" max:"31536000"`
//	DialTimeout      Duration `json:"dial_timeout" min:"1ms" max:"1h"`
//	Hosts            []string `json:"hosts" min:"1" max:"64"`
//
// For integers and floats the bounds are numbers, for [Duration] and
// time.Duration Go durations; for strings, slices and maps they bound the
// length. A value outside them is an error that names the key and says
// what is wanted. Settings come from operators and are not trusted: bound
// every number a connector multiplies, allocates by or waits for, so that
// no value can overflow or exhaust the host.
//
// Every problem is reported at once, up to [MaxProblems], the rest
// counted; settings larger than [MaxTransferConfigBytes] in JSON are an
// error.
func DecodeExtra(extra map[string]any, dst any) error {
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("kv.DecodeExtra: dst must be a non-nil pointer to a struct, not %T", dst)
	}
	if len(extra) == 0 {
		return nil
	}
	const what = "kv_connector_extra_config"
	keys := slices.Sorted(maps.Keys(extra))
	fields := jsonFields(rv.Elem().Type())
	if err := checkKeys(what, keys, slices.Collect(maps.Keys(fields))); err != nil {
		return err
	}
	// One key at a time, so that every error names its key: encoding/json
	// does not say where an UnmarshalJSON method (such as Duration's)
	// failed.
	var problems Problems
	size := 0
	for _, k := range keys {
		if extra[k] == nil {
			// null leaves the value dst held: encoding/json would set a
			// list, map or pointer to nil, past its min.
			continue
		}
		// Counted as written: HTML escaping would make each < six bytes.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err := enc.Encode(map[string]any{k: extra[k]})
		data := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if err != nil {
			problems.Add(fmt.Errorf("%s: %s: %w", what, k, err))
			continue
		}
		if size += len(data); size > MaxTransferConfigBytes {
			return fmt.Errorf("%s: more than %d bytes in JSON: want at most 1 MiB; a connector's settings are a few hundred", what, MaxTransferConfigBytes)
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
			problems.Add(fmt.Errorf("%s: %w", what, err))
			continue
		}
		f := fields[k]
		v, err := rv.Elem().FieldByIndexErr(f.Index)
		if err == nil {
			err = checkRange(k, f, v)
		}
		problems.addIn(what, err)
	}
	return problems.Err()
}

// checkRange checks v, decoded for key into field f, against f's min and
// max tags.
func checkRange(key string, f reflect.StructField, v reflect.Value) error {
	lo, hasLo := f.Tag.Lookup("min")
	hi, hasHi := f.Tag.Lookup("max")
	if !hasLo && !hasHi {
		return nil
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	// Each kind compares in its own type, so that no bound or value is
	// rounded on the way.
	var show string // the value, or its length after the key
	var below, above bool
	var err error
	switch t := v.Type(); {
	case t == reflect.TypeFor[Duration]() || t == reflect.TypeFor[time.Duration]():
		d := time.Duration(v.Int())
		show = d.String()
		below, above, err = outside(lo, hasLo, hi, hasHi, d, time.ParseDuration)
	case v.CanInt():
		show = strconv.FormatInt(v.Int(), 10)
		below, above, err = outside(lo, hasLo, hi, hasHi, v.Int(), parseInt)
	case v.CanUint():
		show = strconv.FormatUint(v.Uint(), 10)
		below, above, err = outside(lo, hasLo, hi, hasHi, v.Uint(), parseUint)
	case v.CanFloat():
		show = strconv.FormatFloat(v.Float(), 'g', -1, 64)
		below, above, err = outside(lo, hasLo, hi, hasHi, v.Float(), parseFloat)
	case t.Kind() == reflect.String, t.Kind() == reflect.Slice, t.Kind() == reflect.Map, t.Kind() == reflect.Array:
		unit := "entries"
		if t.Kind() == reflect.String {
			unit = "bytes"
		}
		show = fmt.Sprintf("has %d %s", v.Len(), unit)
		below, above, err = outside(lo, hasLo, hi, hasHi, int64(v.Len()), parseInt)
	default:
		err = fmt.Errorf("min and max do not apply to %s", t)
	}
	if err != nil {
		return fmt.Errorf("kv.DecodeExtra: field %s: %w", f.Name, err)
	}
	if !below && !above {
		return nil
	}
	var want string
	switch {
	case hasLo && hasHi:
		want = fmt.Sprintf("from %s to %s", lo, hi)
	case hasLo:
		want = "at least " + lo
	default:
		want = "at most " + hi
	}
	return fmt.Errorf("%s %s: want %s", key, show, want)
}

func parseInt(s string) (int64, error)     { return strconv.ParseInt(s, 10, 64) }
func parseUint(s string) (uint64, error)   { return strconv.ParseUint(s, 10, 64) }
func parseFloat(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

// outside reports whether v is below lo or above hi, each bound applying
// where it is set; a bound that does not parse is an error.
func outside[T int64 | uint64 | float64 | time.Duration](lo string, hasLo bool, hi string, hasHi bool, v T, parse func(string) (T, error)) (below, above bool, err error) {
	if hasLo {
		b, err := parse(lo)
		if err != nil {
			return false, false, fmt.Errorf("min tag %q: %w", lo, err)
		}
		below = v < b
	}
	if hasHi {
		b, err := parse(hi)
		if err != nil {
			return false, false, fmt.Errorf("max tag %q: %w", hi, err)
		}
		above = v > b
	}
	return below, above, nil
}

// jsonFields returns the fields of struct type t by the JSON key each
// accepts, following embedded structs the way encoding/json does.
func jsonFields(t reflect.Type) map[string]reflect.StructField {
	fields := map[string]reflect.StructField{}
	var walk func(t reflect.Type, index []int)
	walk = func(t reflect.Type, index []int) {
		for f := range t.Fields() {
			f.Index = append(slices.Clone(index), f.Index...)
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
					walk(ft, f.Index)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			fields[name] = f
		}
	}
	walk(t, nil)
	return fields
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
