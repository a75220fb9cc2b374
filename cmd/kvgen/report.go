package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/kvgen/kvgen/internal/diag"
)

// jsonReport is what a command prints on stdout with -json: one JSON
// object, its report. Its fields are those the command sets, in the order
// it first sets them, then "problems": what report and errorf were given,
// in one shape for every command (diag.Error's JSON; past
// problemcap.Max, a last one saying how many more there are), empty when
// there were none. One list may be streamed an item at a time, so that
// memory holds one item (a binary inspect read) at a time: the object's
// opening and the list's are written with the first item, and the rest
// when the report ends.
type jsonReport struct {
	w        io.Writer
	fields   []jsonField
	problems []error
	started  bool   // the object's "{" is written
	list     string // the list being streamed, "" before the first item
	err      error  // the first write that failed
}

// jsonField is a field of a report; a nil value leaves it out.
type jsonField struct {
	name  string
	value any
}

// set sets a field of the report, which keeps its place if it was set
// before; nil leaves it out, as for a file not yet known.
func (r *jsonReport) set(name string, v any) {
	for i := range r.fields {
		if r.fields[i].name == name {
			r.fields[i].value = v
			return
		}
	}
	r.fields = append(r.fields, jsonField{name, v})
}

// item writes v as the next element of the list called name, the one
// list the report streams, at once; a field of that name set before (an
// empty list, for a report without items) gives way to it. A v that
// cannot be encoded, such as an SBOM that is not JSON, is an error, and
// the report is as if it had not been given.
func (r *jsonReport) item(name string, v any) error {
	data, err := encodeJSON(v, "    ")
	if err != nil {
		return err
	}
	switch r.list {
	case "":
		r.list = name
		r.fields = slices.DeleteFunc(r.fields, func(f jsonField) bool { return f.name == name })
		r.key(name)
		r.write([]byte("[\n    "))
	case name:
		r.write([]byte(",\n    "))
	default:
		panic("kvgen: a report streams one list, " + r.list + ", not " + name)
	}
	r.write(data)
	return nil
}

// end writes what the report has not written yet, problems last, and
// returns the first error writing it met.
func (r *jsonReport) end() error {
	if r.list != "" {
		r.write([]byte("\n  ]"))
	}
	for _, f := range r.fields {
		if f.value != nil {
			r.key(f.name)
			r.value(f.value, "  ")
		}
	}
	problems := []*diag.Error{}
	if len(r.problems) > 0 {
		problems = diag.Flatten(errors.Join(r.problems...))
	}
	r.key("problems")
	r.value(problems, "  ")
	r.write([]byte("\n}\n"))
	return r.err
}

// key writes what comes before a field's value: the object's opening or
// the comma after the field before, and the field's name.
func (r *jsonReport) key(name string) {
	sep := ",\n"
	if !r.started {
		sep, r.started = "{\n", true
	}
	r.write([]byte(sep + "  " + strconv.Quote(name) + ": "))
}

// value writes v, indented as a field's value (or an item of a list)
// at the depth prefix says.
func (r *jsonReport) value(v any, prefix string) {
	data, err := encodeJSON(v, prefix)
	if err != nil && r.err == nil {
		r.err = err
	}
	r.write(data)
}

func (r *jsonReport) write(data []byte) {
	if r.err == nil {
		_, r.err = r.w.Write(data)
	}
}

// encodeJSON returns v as indented JSON, each line after the first
// starting with prefix, without a final newline, and with every character
// that is not printable escaped: encoding/json leaves DEL, U+009B (a
// terminal's CSI) and bidirectional-text controls in strings as they are,
// and what kvgen prints may come from a hostile file. HTML's characters
// stay as they are ("v0.1.0 => ../dir" reads as it is).
func encodeJSON(v any, prefix string) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetIndent(prefix, "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return printableJSON(bytes.TrimSuffix(b.Bytes(), []byte("\n"))), nil
}

// printableJSON escapes, as \uXXXX, each character of JSON text that is
// neither printable nor a newline; outside strings JSON text is printable
// ASCII, so the escapes land in strings, where they mean what they replace.
// A byte that is no UTF-8 becomes \ufffd, the replacement character, as
// encoding/json makes it: the output is valid UTF-8 whatever came in.
func printableJSON(data []byte) []byte {
	var b bytes.Buffer
	for len(data) > 0 {
		r, n := utf8.DecodeRune(data)
		if r == utf8.RuneError && n == 1 {
			b.WriteString(`\ufffd`)
		} else if r == '\n' || strconv.IsPrint(r) {
			b.Write(data[:n])
		} else if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			fmt.Fprintf(&b, `\u%04x\u%04x`, r1, r2)
		} else {
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		data = data[n:]
	}
	return b.Bytes()
}
