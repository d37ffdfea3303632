package toolclient

import (
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// EncodeValue returns the JSON of v, the same bytes json.Marshal returns,
// in one buffer of exactly their length: a first walk counts them, a
// second writes them. json.Marshal grows its buffer by doubling and then
// copies it out, so an input of n bytes costs it up to 3n at once (and
// its pool keeps the grown buffer past the call); a tool input by
// reference may be MaxValueBytes, and a forEach sends up to
// workflow.MaxConcurrency of them at once. Strings, maps and slices of
// plain JSON values are walked; any other value (numbers, and the rare
// non-JSON type) is encoded by json.Marshal, its own small buffer.
func EncodeValue(v any) ([]byte, error) {
	var c jsonCounter
	if err := c.value(v); err != nil {
		return nil, err
	}
	w := jsonWriter{b: make([]byte, 0, c.n)}
	if err := w.value(v); err != nil {
		return nil, err
	}
	return w.b, nil
}

// jsonCounter counts the bytes jsonWriter writes.
type jsonCounter struct{ n int }

func (c *jsonCounter) value(v any) error {
	switch t := v.(type) {
	case string:
		c.n += quotedLen(t)
	case map[string]any:
		if t == nil {
			c.n += len("null")
			return nil
		}
		c.n += 2 + max(len(t)-1, 0)
		for k, e := range t {
			c.n += quotedLen(k) + 1
			if err := c.value(e); err != nil {
				return err
			}
		}
	case []any:
		if t == nil {
			c.n += len("null")
			return nil
		}
		c.n += 2 + max(len(t)-1, 0)
		for _, e := range t {
			if err := c.value(e); err != nil {
				return err
			}
		}
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		c.n += len(b)
	}
	return nil
}

// jsonWriter appends the JSON of a value to b, as json.Marshal writes it:
// map keys sorted, strings escaped alike (HTML characters, U+2028 and
// U+2029 included; invalid UTF-8 as U+FFFD).
type jsonWriter struct{ b []byte }

func (w *jsonWriter) value(v any) error {
	switch t := v.(type) {
	case string:
		w.b = appendQuoted(w.b, t)
	case map[string]any:
		if t == nil {
			w.b = append(w.b, "null"...)
			return nil
		}
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.b = append(w.b, '{')
		for i, k := range keys {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			w.b = appendQuoted(w.b, k)
			w.b = append(w.b, ':')
			if err := w.value(t[k]); err != nil {
				return err
			}
		}
		w.b = append(w.b, '}')
	case []any:
		if t == nil {
			w.b = append(w.b, "null"...)
			return nil
		}
		w.b = append(w.b, '[')
		for i, e := range t {
			if i > 0 {
				w.b = append(w.b, ',')
			}
			if err := w.value(e); err != nil {
				return err
			}
		}
		w.b = append(w.b, ']')
	default:
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		w.b = append(w.b, b...)
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// escaped reports whether json.Marshal escapes the ASCII byte c, and how:
// 0 for no escape, 'u' for \u00XX, else the letter after the backslash.
func escaped(c byte) byte {
	switch c {
	case '"', '\\':
		return c
	case '\n':
		return 'n'
	case '\r':
		return 'r'
	case '\t':
		return 't'
	case '\b':
		return 'b'
	case '\f':
		return 'f'
	case '<', '>', '&':
		return 'u'
	}
	if c < 0x20 {
		return 'u'
	}
	return 0
}

// quotedLen is the length of appendQuoted(nil, s).
func quotedLen(s string) int {
	n := 2
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			switch escaped(c) {
			case 0:
				n++
			case 'u':
				n += 6
			default:
				n += 2
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 6 // \ufffd
		case r == '\u2028' || r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// appendQuoted appends s as a JSON string, escaped as json.Marshal does.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			e := escaped(c)
			if e == 0 {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			if e == 'u' {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			} else {
				b = append(b, '\\', e)
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
