package dynamolocal

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/truora/minidyn/types"
)

// The stored DynamoDB JSON of an item (entry.data) is read and written
// on every write of the item: encoding/json's reflection over
// map[string]*types.Item was most of a conditional write's CPU. The
// layer writes it itself (appendStored, byte for byte what encoding/json
// wrote) and reads it with a decoder of exactly that form
// (decodeStored), which hands anything else (a snapshot written by
// another version, an escape in a string it does not read itself) to
// encoding/json, so that every input decodes as json.Unmarshal decodes
// it.

// decodeStored decodes an item's stored DynamoDB JSON into a new map
// the caller may change, as json.Unmarshal into map[string]*types.Item
// does; it fails as json.Unmarshal fails.
func decodeStored(data []byte) (map[string]*types.Item, error) {
	d := storedDecoder{data: data}
	if item, ok := d.object(); ok && d.pos == len(data) {
		return item, nil
	}
	var item map[string]*types.Item
	if err := json.Unmarshal(data, &item); err != nil {
		return nil, err
	}
	return item, nil
}

// storedDecoder reads the form appendStored writes; false from any of
// its methods means "not that form" (decodeStored then falls back).
type storedDecoder struct {
	data []byte
	pos  int
}

func (d *storedDecoder) next(c byte) bool {
	if d.pos < len(d.data) && d.data[d.pos] == c {
		d.pos++
		return true
	}
	return false
}

func (d *storedDecoder) literal(s string) bool {
	if len(d.data)-d.pos >= len(s) && string(d.data[d.pos:d.pos+len(s)]) == s {
		d.pos += len(s)
		return true
	}
	return false
}

// str reads a JSON string as json.Unmarshal reads one: unescaped here
// when it holds only the escapes encoding/json writes of printable text
// (\" \\ \/ \b \f \n \r \t \u) and valid UTF-8, otherwise through
// json.Unmarshal (surrogates, invalid UTF-8 it replaces).
func (d *storedDecoder) str() (string, bool) {
	if !d.next('"') {
		return "", false
	}
	// The closing quote is the first quote no escape takes: q, the next
	// quote, is looked for again only when an escape took it.
	start, i, escapes := d.pos, d.pos, 0
	q := -1
	for {
		if q < i {
			if q = bytes.IndexByte(d.data[i:], '"'); q < 0 {
				return "", false
			}
			q += i
		}
		k := bytes.IndexByte(d.data[i:q], '\\')
		if k < 0 {
			break
		}
		escapes++
		i += k + 2 // past the escaped character (q itself, when it is the quote)
	}
	end := q
	raw := d.data[start:end]
	d.pos = end + 1
	ascii := true
	for _, c := range raw {
		if c < 0x20 {
			return "", false
		}
		if c >= utf8.RuneSelf {
			ascii = false
		}
	}
	if ascii || utf8.Valid(raw) {
		if escapes == 0 {
			return string(raw), true
		}
		if s, ok := unescape(raw, escapes); ok {
			return s, true
		}
	}
	var s string
	if json.Unmarshal(d.data[start-1:d.pos], &s) != nil {
		return "", false
	}
	return s, true
}

// unescape is the text of raw, a JSON string's contents holding n
// escapes; false for an escape it leaves to json.Unmarshal (a \u of a
// surrogate).
func unescape(raw []byte, n int) (string, bool) {
	var out strings.Builder // its String is the bytes written, not a copy
	out.Grow(len(raw) - n)
	for len(raw) > 0 {
		k := bytes.IndexByte(raw, '\\')
		if k < 0 {
			out.Write(raw)
			break
		}
		out.Write(raw[:k])
		if k+1 >= len(raw) {
			return "", false
		}
		next := k + 2
		switch raw[k+1] {
		case '"', '\\', '/':
			out.WriteByte(raw[k+1])
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			// A code point outside the surrogates, as json.Unmarshal
			// reads it; a surrogate (half of a pair, or alone) is its.
			if k+6 > len(raw) {
				return "", false
			}
			r, err := strconv.ParseUint(string(raw[k+2:k+6]), 16, 32)
			if err != nil || utf16.IsSurrogate(rune(r)) {
				return "", false
			}
			out.WriteRune(rune(r))
			next = k + 6
		default:
			return "", false
		}
		raw = raw[next:]
	}
	return out.String(), true
}

// bytes reads a base64 string as json.Unmarshal reads one into []byte.
func (d *storedDecoder) bytes() ([]byte, bool) {
	if d.literal("null") {
		return nil, true
	}
	s, ok := d.str()
	if !ok {
		return nil, false
	}
	b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Decode(b, []byte(s))
	if err != nil {
		return nil, false
	}
	return b[:n], true
}

// object reads an item (or a map's value): {"name":value,...}.
func (d *storedDecoder) object() (map[string]*types.Item, bool) {
	if !d.next('{') {
		return nil, false
	}
	item := map[string]*types.Item{}
	if d.next('}') {
		return item, true
	}
	for {
		k, ok := d.str()
		if !ok || !d.next(':') {
			return nil, false
		}
		v, ok := d.value()
		if !ok {
			return nil, false
		}
		item[k] = v
		if d.next('}') {
			return item, true
		}
		if !d.next(',') {
			return nil, false
		}
	}
}

// list reads [elem,...], elem reading one element.
func (d *storedDecoder) list(elem func() bool) bool {
	if !d.next('[') {
		return false
	}
	if d.next(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if d.next(']') {
			return true
		}
		if !d.next(',') {
			return false
		}
	}
}

// value reads one attribute value: an object of one typed member.
func (d *storedDecoder) value() (*types.Item, bool) {
	if !d.next('{') {
		return nil, false
	}
	typ, ok := d.str()
	if !ok || !d.next(':') {
		return nil, false
	}
	v := &types.Item{}
	switch typ {
	case "S", "N":
		s, ok := d.str()
		if !ok {
			return nil, false
		}
		if typ == "S" {
			v.S = &s
		} else {
			v.N = &s
		}
	case "B":
		b, ok := d.bytes()
		if !ok || b == nil {
			return nil, false
		}
		v.B = b
	case "BOOL", "NULL":
		var b bool
		switch {
		case d.literal("true"):
			b = true
		case d.literal("false"):
		default:
			return nil, false
		}
		if typ == "BOOL" {
			v.BOOL = &b
		} else {
			v.NULL = &b
		}
	case "SS", "NS":
		ss := []*string{}
		if !d.list(func() bool {
			s, ok := d.str()
			ss = append(ss, &s)
			return ok
		}) {
			return nil, false
		}
		if typ == "SS" {
			v.SS = ss
		} else {
			v.NS = ss
		}
	case "BS":
		bs := [][]byte{}
		if !d.list(func() bool {
			b, ok := d.bytes()
			bs = append(bs, b)
			return ok
		}) {
			return nil, false
		}
		v.BS = bs
	case "L":
		l := []*types.Item{}
		if !d.list(func() bool {
			e, ok := d.value()
			l = append(l, e)
			return ok
		}) {
			return nil, false
		}
		v.L = l
	case "M":
		m, ok := d.object()
		if !ok {
			return nil, false
		}
		v.M = m
	default:
		return nil, false
	}
	if !d.next('}') {
		return nil, false
	}
	return v, true
}

// appendStored appends item's stored DynamoDB JSON to b: what
// marshalRaw(encodeItem(item)) writes, byte for byte (encodeAV's types,
// attributes sorted, strings escaped as encoding/json escapes them
// without HTML escaping).
func appendStored(b []byte, item map[string]*types.Item) []byte {
	keys := make([]string, 0, len(item))
	for k := range item {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSONString(b, k)
		b = append(b, ':')
		b = appendStoredAV(b, item[k])
	}
	return append(b, '}')
}

// appendStoredAV is encodeAV's value, encoded.
func appendStoredAV(b []byte, v *types.Item) []byte {
	strs := func(b []byte, ss []*string) []byte {
		b = append(b, '[')
		for i, s := range ss {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, *s)
		}
		return append(b, ']')
	}
	bin := func(b, v []byte) []byte {
		if v == nil {
			return append(b, "null"...)
		}
		b = append(b, '"')
		b = base64.StdEncoding.AppendEncode(b, v)
		return append(b, '"')
	}
	switch {
	case v == nil:
		return append(b, `{"NULL":true}`...)
	case v.S != nil:
		b = append(b, `{"S":`...)
		b = appendJSONString(b, *v.S)
	case v.N != nil:
		b = append(b, `{"N":`...)
		b = appendJSONString(b, *v.N)
	case v.B != nil:
		b = append(b, `{"B":`...)
		b = bin(b, v.B)
	case v.BOOL != nil:
		if *v.BOOL {
			return append(b, `{"BOOL":true}`...)
		}
		return append(b, `{"BOOL":false}`...)
	case v.SS != nil:
		b = append(b, `{"SS":`...)
		b = strs(b, v.SS)
	case v.NS != nil:
		b = append(b, `{"NS":`...)
		b = strs(b, v.NS)
	case v.BS != nil:
		b = append(b, `{"BS":[`...)
		for i, e := range v.BS {
			if i > 0 {
				b = append(b, ',')
			}
			b = bin(b, e)
		}
		b = append(b, ']')
	case v.L != nil:
		b = append(b, `{"L":[`...)
		for i, e := range v.L {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendStoredAV(b, e)
		}
		b = append(b, ']')
	case v.M != nil:
		b = append(b, `{"M":`...)
		b = appendStored(b, v.M)
	default:
		return append(b, `{"NULL":true}`...)
	}
	return append(b, '}')
}

// appendJSONString appends s as encoding/json encodes a string without
// HTML escaping (its appendString, escapeHTML false).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
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
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
