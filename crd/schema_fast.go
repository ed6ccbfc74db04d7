package crd

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// quick is a schema's fast check: compiled from the schema (translated into a JSON Schema
// document, see translate), it knows the keywords structural schemas mostly use and walks an
// object without allocating or converting its numbers. It answers only "valid" (then
// apiextensions' OpenAPI schema validator would find nothing) or "do not know": a value it
// cannot vouch for, a keyword it does not know, anything unusual. Validate then asks the
// validator, which also words the errors. FuzzQuickValid checks that it never calls valid what
// the validator refuses.
type quick struct {
	unsupported bool  // a keyword quick does not know: never vouch for a value here
	types       uint8 // typeObject | ...; 0 means any type
	props       map[string]*quick
	required    []string
	additional  *quick // the schema of properties not in props; nil: any
	closed      bool   // additionalProperties: false
	items       *quick // nil: any
	enum        []any  // string, bool, int64 or nil; nil slice: no enum
	hasEnum     bool
	min, max    *int64
	exclMin     bool
	exclMax     bool
	minLen      int
	maxLen      int // -1: none
	minItems    int
	maxItems    int // -1: none
	minProps    int
	maxProps    int // -1: none
	dateTime    bool
}

const (
	typeObject uint8 = 1 << iota
	typeArray
	typeString
	typeInteger
	typeNumber
	typeBoolean
	typeNull
)

var typeBits = map[string]uint8{
	"object": typeObject, "array": typeArray, "string": typeString, "integer": typeInteger,
	"number": typeNumber, "boolean": typeBoolean, "null": typeNull,
}

// translate rewrites the OpenAPI extensions of a schema document (the JSON of a
// JSONSchemaProps, numbers as json.Number) into the JSON Schema keywords quick knows:
// `nullable` allows null (of the type: an enum must still list it), `x-kubernetes-int-or-string` allows an integer or a string, other
// `x-kubernetes-*` keys (which the validator does not check) are dropped. Annotations
// (`default`, `description`, `example`) stay; they do not validate.
func translate(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if strings.HasPrefix(k, "x-kubernetes-") || k == "nullable" || k == "example" || k == "externalDocs" {
				continue
			}
			switch k {
			case "properties", "patternProperties", "definitions":
				m, _ := e.(map[string]any)
				props := make(map[string]any, len(m))
				for name, s := range m {
					props[name] = translate(s)
				}
				out[k] = props
			default:
				out[k] = translate(e)
			}
		}
		if ios, _ := v["x-kubernetes-int-or-string"].(bool); ios {
			delete(out, "type")
			delete(out, "anyOf")
			out["anyOf"] = []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}
		}
		if nullable, _ := v["nullable"].(bool); nullable {
			// null passes the type, not an enum that does not list it (as in the validator).
			if t, ok := out["type"].(string); ok {
				out["type"] = []any{t, "null"}
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = translate(e)
		}
		return out
	}
	return v
}

// compileQuick compiles doc (a translated schema, see translate) into a quick check.
func compileQuick(doc any) *quick {
	s, ok := doc.(map[string]any)
	if !ok {
		return &quick{unsupported: true}
	}
	q := &quick{maxLen: -1, maxItems: -1, maxProps: -1}
	for k, v := range s {
		if !q.keyword(k, v) {
			return &quick{unsupported: true}
		}
	}
	return q
}

// keyword compiles one keyword of a schema node; false means quick cannot check it.
func (q *quick) keyword(k string, v any) bool {
	switch k {
	case "description", "title", "default", "example":
		return true
	case "type":
		return q.typeKeyword(v)
	case "anyOf":
		// Only x-kubernetes-int-or-string's translation: an integer or a string.
		l, ok := v.([]any)
		if !ok || len(l) != 2 || q.types != 0 {
			return false
		}
		a, _ := l[0].(map[string]any)
		b, _ := l[1].(map[string]any)
		if len(a) != 1 || len(b) != 1 || a["type"] != "integer" || b["type"] != "string" {
			return false
		}
		q.types = typeInteger | typeString
		return true
	case "properties":
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		q.props = make(map[string]*quick, len(m))
		for name, sub := range m {
			q.props[name] = compileQuick(sub)
		}
		return true
	case "required":
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range l {
			s, ok := e.(string)
			if !ok {
				return false
			}
			q.required = append(q.required, s)
		}
		return true
	case "additionalProperties":
		switch v := v.(type) {
		case bool:
			q.closed = !v
			return true
		case map[string]any:
			q.additional = compileQuick(v)
			return true
		}
		return false
	case "items":
		if _, ok := v.(map[string]any); !ok {
			return false // a list of schemas (tuple form)
		}
		q.items = compileQuick(v)
		return true
	case "enum":
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range l {
			switch e := e.(type) {
			case string, bool, nil:
				q.enum = append(q.enum, e)
			case json.Number:
				n, ok := integer(e)
				if !ok {
					return false
				}
				q.enum = append(q.enum, n)
			default:
				return false
			}
		}
		q.hasEnum = true
		return true
	case "minimum", "maximum":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		i, ok := integer(n)
		if !ok {
			return false
		}
		if k == "minimum" {
			q.min = &i
		} else {
			q.max = &i
		}
		return true
	case "exclusiveMinimum", "exclusiveMaximum": // draft 4: booleans
		b, ok := v.(bool)
		if !ok {
			return false
		}
		if k == "exclusiveMinimum" {
			q.exclMin = b
		} else {
			q.exclMax = b
		}
		return true
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties":
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		i, ok := integer(n)
		if !ok || i < 0 || i > 1<<31 {
			return false
		}
		switch k {
		case "minLength":
			q.minLen = int(i)
		case "maxLength":
			q.maxLen = int(i)
		case "minItems":
			q.minItems = int(i)
		case "maxItems":
			q.maxItems = int(i)
		case "minProperties":
			q.minProps = int(i)
		default:
			q.maxProps = int(i)
		}
		return true
	case "format":
		// Only the format Kubernetes writes timestamps in; the validator asserts formats
		// (draft 4), so any other is left to it.
		q.dateTime = v == "date-time"
		return q.dateTime
	}
	return false
}

func (q *quick) typeKeyword(v any) bool {
	names := []any{v}
	if l, ok := v.([]any); ok {
		names = l
	}
	for _, n := range names {
		s, _ := n.(string)
		bit, ok := typeBits[s]
		if !ok {
			return false
		}
		q.types |= bit
	}
	return true
}

// integer is n as an int64 when its text is a plain integer (digits, an optional minus sign).
func integer(n json.Number) (int64, bool) {
	s := string(n)
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for i := range len(s) {
		if c := s[i]; (c < '0' || c > '9') && (i > 0 || c != '-') {
			return 0, false
		}
	}
	i, err := strconv.ParseInt(s, 10, 64)
	return i, err == nil
}

// valid reports whether v certainly satisfies q; false means it may not.
func (q *quick) valid(v any) bool {
	if q.unsupported {
		return false
	}
	var bit uint8
	var num int64
	isInt := false
	switch v := v.(type) {
	case map[string]any:
		bit = typeObject
	case []any:
		bit = typeArray
	case string:
		bit = typeString
	case bool:
		bit = typeBoolean
	case nil:
		bit = typeNull
	case json.Number:
		if num, isInt = integer(v); !isInt {
			return false // a fraction or an exponent: the validator decides
		}
		bit = typeInteger
	case int64:
		num, isInt, bit = v, true, typeInteger
	case int:
		num, isInt, bit = int64(v), true, typeInteger
	default:
		return false
	}
	if q.types != 0 && q.types&bit == 0 && !(bit == typeInteger && q.types&typeNumber != 0) {
		return false
	}
	if q.hasEnum && !q.inEnum(v, num, isInt) {
		return false
	}
	if isInt && !q.inRange(num) {
		return false
	}
	switch v := v.(type) {
	case string:
		return q.validString(v)
	case map[string]any:
		return q.validObject(v)
	case []any:
		if len(v) < q.minItems || q.maxItems >= 0 && len(v) > q.maxItems {
			return false
		}
		if q.items != nil {
			for _, e := range v {
				if !q.items.valid(e) {
					return false
				}
			}
		}
	}
	return true
}

func (q *quick) inEnum(v any, num int64, isInt bool) bool {
	for _, e := range q.enum {
		switch e := e.(type) {
		case int64:
			if isInt && e == num {
				return true
			}
		case nil:
			if v == nil {
				return true
			}
		default:
			if !isInt && e == v {
				return true
			}
		}
	}
	return false
}

func (q *quick) inRange(n int64) bool {
	if q.min != nil && (n < *q.min || q.exclMin && n == *q.min) {
		return false
	}
	return q.max == nil || n < *q.max || !q.exclMax && n == *q.max
}

func (q *quick) validString(s string) bool {
	if q.minLen > 0 || q.maxLen >= 0 {
		n := utf8.RuneCountInString(s)
		if n < q.minLen || q.maxLen >= 0 && n > q.maxLen {
			return false
		}
	}
	return !q.dateTime || isSimpleDateTime(s)
}

func (q *quick) validObject(m map[string]any) bool {
	if len(m) < q.minProps || q.maxProps >= 0 && len(m) > q.maxProps {
		return false
	}
	for _, r := range q.required {
		if _, ok := m[r]; !ok {
			return false
		}
	}
	for k, e := range m {
		sub, known := q.props[k]
		switch {
		case known:
		case q.closed:
			return false
		case q.additional != nil:
			sub = q.additional
		default:
			continue
		}
		if !sub.valid(e) {
			return false
		}
	}
	return true
}

// isSimpleDateTime reports whether s is a date-time as Kubernetes writes one,
// "2006-01-02T15:04:05Z", with every field in range; other valid forms are left to the
// validator.
func isSimpleDateTime(s string) bool {
	if len(s) != 20 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != 'Z' {
		return false
	}
	num := func(i, j int) int {
		n := 0
		for _, c := range []byte(s[i:j]) {
			if c < '0' || c > '9' {
				return -1
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, second := num(11, 13), num(14, 16), num(17, 19)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || second < 0 || second > 59 {
		return false
	}
	days := [...]int{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}[month-1]
	if month == 2 && year%4 == 0 && (year%100 != 0 || year%400 == 0) {
		days = 29
	}
	return day <= days
}
