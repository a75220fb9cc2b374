package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
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
		if err := json.Unmarshal(data, rv.Interface()); err != nil {
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
type Duration time.Duration

// UnmarshalJSON accepts "1.5s" or 1.5.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case float64:
		*d = Duration(v * float64(time.Second))
		return nil
	case string:
		p, err := time.ParseDuration(v)
		if err != nil {
			return fmt.Errorf("duration %q: want a Go duration such as \"500ms\" or \"2s\", or a number of seconds", v)
		}
		*d = Duration(p)
		return nil
	}
	return fmt.Errorf("duration %s: want a string such as \"2s\" or a number of seconds", b)
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// String returns the duration as a Go duration string.
func (d Duration) String() string { return time.Duration(d).String() }
