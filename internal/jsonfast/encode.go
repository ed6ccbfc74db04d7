package jsonfast

import (
	"encoding/json"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Marshal returns the JSON encoding of v exactly as json.Marshal(v) returns it: the same
// bytes, or the same error. It is fast for the form objects take once decoded (Decode):
// map[string]any, []any, string, json.Number, bool, nil, and the int64 and int the write path
// stamps. Any other value inside v is encoded by encoding/json itself, and anything the fast
// path cannot vouch for (an invalid json.Number, a nesting deep enough to be a cycle, an error
// of encoding/json) makes it encode all of v with json.Marshal, so the answer is always
// encoding/json's. FuzzMarshal checks the equality.
//
// The returned slice has no more spare capacity than json.Marshal's would (stored objects keep
// it for life): the encoding is built in a scratch buffer, then copied once at its size.
func Marshal(v any) ([]byte, error) {
	raw, _, inScratch, err := AppendMarshal(nil, v)
	if inScratch {
		raw = append([]byte(nil), raw...)
	}
	return raw, err
}

// AppendMarshal is Marshal building v's encoding in scratch (grown as needed and returned for
// reuse; nil allocates one), for a caller that reuses buffers across encodings. inScratch says
// raw is the start of grown; otherwise encoding/json had to decide and raw is its own.
func AppendMarshal(scratch []byte, v any) (raw, grown []byte, inScratch bool, err error) {
	if scratch == nil {
		scratch = make([]byte, 0, 1024)
	}
	b, ok := appendJSON(scratch[:0], v, 0)
	if !ok {
		raw, err = json.Marshal(v)
		return raw, b[:0], false, err
	}
	return b, b, true, nil
}

// maxFastDepth is how deep the fast path nests before handing over to encoding/json, which
// detects cycles after the same depth (its startDetectingCyclesAfter).
const maxFastDepth = 1000

// appendJSON appends v's encoding to b; ok is false when encoding/json must decide.
func appendJSON(b []byte, v any, depth int) (_ []byte, ok bool) {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...), true
	case string:
		return AppendString(b, v), true
	case json.Number:
		s := string(v)
		if s == "" {
			s = "0" // encoding/json's rule for the zero Number
		}
		if !validNumber(s) {
			return b, false
		}
		return append(b, s...), true
	case bool:
		if v {
			return append(b, "true"...), true
		}
		return append(b, "false"...), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case map[string]any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth >= maxFastDepth {
			return b, false
		}
		return appendObject(b, v, depth+1)
	case []any:
		if v == nil {
			return append(b, "null"...), true
		}
		if depth >= maxFastDepth {
			return b, false
		}
		b = append(b, '[')
		for i, e := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if b, ok = appendJSON(b, e, depth+1); !ok {
				return b, false
			}
		}
		return append(b, ']'), true
	default:
		// Floats, typed maps and slices, Marshalers: encoding/json's own encoding, which is
		// what it writes for them nested too.
		raw, err := json.Marshal(v)
		if err != nil {
			return b, false
		}
		return append(b, raw...), true
	}
}

// appendObject appends m with its keys in byte order, as encoding/json sorts them.
func appendObject(b []byte, m map[string]any, depth int) (_ []byte, ok bool) {
	var small [16]string
	keys := small[:0]
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendString(b, k)
		b = append(b, ':')
		if b, ok = appendJSON(b, m[k], depth); !ok {
			return b, false
		}
	}
	return append(b, '}'), true
}

// hexDigits are the digits of \u escapes, lower case as encoding/json writes them.
const hexDigits = "0123456789abcdef"

// AppendString appends s as a JSON string exactly as Marshal (and encoding/json) writes it:
// with HTML escaping on (its default), <, > and & as \u003c, \u003e and \u0026, U+2028 and
// U+2029 escaped, invalid UTF-8 as \ufffd, control characters as \b, \f, \n, \r, \t or \u00XX.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
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
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
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

// validNumber reports whether s is a JSON number literal (RFC 8259's grammar), the check
// encoding/json makes before writing a json.Number.
func validNumber(s string) bool {
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i == len(s) || s[i] < '0' || s[i] > '9' {
			return false
		}
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return i == len(s)
}
