package jsonfast

import (
	"bytes"
	"encoding/json"
	"unicode/utf16"
	"unicode/utf8"
)

// Parse decodes data, which must hold one JSON value and nothing but white space around it,
// into what encoding/json's Decoder with UseNumber gives for an any: map[string]any, []any,
// string, json.Number, bool or nil, a repeated key keeping its last value.
//
// ok is false when data is not such a document (a syntax error, trailing data) or holds what
// the fast path leaves to encoding/json (invalid UTF-8, a lone surrogate escape, nesting over
// 10,000 levels): the caller then decodes with encoding/json, whose value or error is the
// answer (Decode and DecodeObject do). duplicates reports whether some object repeats a key.
// FuzzParse checks that whatever it decodes equals encoding/json's decoding.
func Parse(data []byte) (v any, duplicates bool, ok bool) {
	p := parser{data: data}
	p.skipSpace()
	v, ok = p.value(0)
	if !ok {
		return nil, false, false
	}
	p.skipSpace()
	if p.i != len(data) {
		return nil, false, false
	}
	return v, p.dups, true
}

// maxParseDepth is encoding/json's nesting limit; deeper documents are left to it.
const maxParseDepth = 10000

// parser is one parse of data; i is the next byte to read.
type parser struct {
	data []byte
	i    int
	dups bool
}

func (p *parser) skipSpace() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

// value parses the value at p.i (white space skipped before it, not after).
func (p *parser) value(depth int) (any, bool) {
	if p.i >= len(p.data) {
		return nil, false
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, common, ok := p.str()
		if common != nil {
			return common, ok // boxed once, in the binary: no allocation
		}
		return s, ok
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	}
	return nil, false
}

func (p *parser) literal(word string) bool {
	if len(p.data)-p.i < len(word) || string(p.data[p.i:p.i+len(word)]) != word {
		return false
	}
	p.i += len(word)
	return true
}

func (p *parser) object(depth int) (any, bool) {
	if depth > maxParseDepth {
		return nil, false
	}
	p.i++ // {
	m := map[string]any{}
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return m, true
	}
	keys := 0
	for {
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != '"' {
			return nil, false
		}
		k, _, ok := p.str()
		if !ok {
			return nil, false
		}
		p.skipSpace()
		if p.i >= len(p.data) || p.data[p.i] != ':' {
			return nil, false
		}
		p.i++
		p.skipSpace()
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		m[k] = v
		keys++
		if more, ok := p.afterItem('}'); !ok {
			return nil, false
		} else if !more {
			if len(m) != keys {
				p.dups = true
			}
			return m, true
		}
	}
}

// afterItem reads what follows a member or an element: a comma (more, another follows) or
// end, which closes the container; ok is false for anything else.
func (p *parser) afterItem(end byte) (more, ok bool) {
	p.skipSpace()
	if p.i >= len(p.data) {
		return false, false
	}
	switch p.data[p.i] {
	case ',':
		p.i++
		return true, true
	case end:
		p.i++
		return false, true
	}
	return false, false
}

func (p *parser) array(depth int) (any, bool) {
	if depth > maxParseDepth {
		return nil, false
	}
	p.i++ // [
	a := []any{}
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return a, true
	}
	for {
		p.skipSpace()
		v, ok := p.value(depth)
		if !ok {
			return nil, false
		}
		a = append(a, v)
		if more, ok := p.afterItem(']'); !ok {
			return nil, false
		} else if !more {
			return a, true
		}
	}
}

// number reads a number literal as json.Number, checked against JSON's grammar.
func (p *parser) number() (any, bool) {
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		if c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E' {
			p.i++
			continue
		}
		break
	}
	s := string(p.data[start:p.i])
	if !validNumber(s) {
		return nil, false
	}
	return json.Number(s), true
}

// str reads a string. Plain ASCII and valid UTF-8 are taken as they are; escapes are decoded
// as encoding/json decodes them; invalid UTF-8 and lone surrogates are left to encoding/json
// (which replaces them with U+FFFD). common is the string as an interface value too when it
// is one of the common ones (commonString), nil otherwise.
func (p *parser) str() (s string, common any, ok bool) {
	p.i++ // "
	start := p.i
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			b := p.data[start:p.i]
			p.i++
			if common = commonString(b); common != nil {
				return common.(string), common, true
			}
			return string(b), nil, true
		case c == '\\':
			s, ok := p.escapedStr(start)
			return s, nil, ok
		case c < 0x20:
			return "", nil, false
		case c < utf8.RuneSelf:
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", nil, false
			}
			p.i += size
		}
	}
	return "", nil, false
}

// escapedStr finishes a string that holds escapes; p.i is at the first backslash and start
// is where the string's content began.
func (p *parser) escapedStr(start int) (string, bool) {
	b := make([]byte, 0, p.i-start+16)
	b = append(b, p.data[start:p.i]...)
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return string(b), true
		case c == '\\':
			if p.i+1 >= len(p.data) {
				return "", false
			}
			e := p.data[p.i+1]
			p.i += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := p.hex4()
				if !ok {
					return "", false
				}
				if utf16.IsSurrogate(r) {
					if p.i+1 >= len(p.data) || p.data[p.i] != '\\' || p.data[p.i+1] != 'u' {
						return "", false
					}
					p.i += 2
					r2, ok := p.hex4()
					if !ok {
						return "", false
					}
					r = utf16.DecodeRune(r, r2)
					if r == utf8.RuneError {
						return "", false
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", false
			}
		case c < 0x20:
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			p.i++
		default:
			r, size := utf8.DecodeRune(p.data[p.i:])
			if r == utf8.RuneError && size == 1 {
				return "", false
			}
			b = append(b, p.data[p.i:p.i+size]...)
			p.i += size
		}
	}
	return "", false
}

// hex4 reads the four hex digits of a \u escape.
func (p *parser) hex4() (rune, bool) {
	if len(p.data)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.data[p.i : p.i+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	p.i += 4
	return r, true
}

// commonString returns b as an interface value, without allocating, when it is one of the keys
// and values objects repeat (their metadata, managedFields, Events, conditions): a string made
// of each would be garbage at once in most maps, and boxing it in an interface a second
// allocation. Each case boxes a constant, which the compiler keeps in the binary. Nil when b
// is none of them.
func commonString(b []byte) any {
	switch string(b) { // compiled without converting b
	case "apiVersion":
		return "apiVersion"
	case "kind":
		return "kind"
	case "metadata":
		return "metadata"
	case "name":
		return "name"
	case "namespace":
		return "namespace"
	case "uid":
		return "uid"
	case "resourceVersion":
		return "resourceVersion"
	case "generation":
		return "generation"
	case "creationTimestamp":
		return "creationTimestamp"
	case "deletionTimestamp":
		return "deletionTimestamp"
	case "labels":
		return "labels"
	case "annotations":
		return "annotations"
	case "finalizers":
		return "finalizers"
	case "managedFields":
		return "managedFields"
	case "ownerReferences":
		return "ownerReferences"
	case "spec":
		return "spec"
	case "status":
		return "status"
	case "replicas":
		return "replicas"
	case "image":
		return "image"
	case "strategy":
		return "strategy"
	case "conditions":
		return "conditions"
	case "type":
		return "type"
	case "v1":
		return "v1"
	case "manager":
		return "manager"
	case "operation":
		return "operation"
	case "Update":
		return "Update"
	case "Apply":
		return "Apply"
	case "time":
		return "time"
	case "fieldsType":
		return "fieldsType"
	case "FieldsV1":
		return "FieldsV1"
	case "fieldsV1":
		return "fieldsV1"
	case "subresource":
		return "subresource"
	case ".":
		return "."
	case "f:metadata":
		return "f:metadata"
	case "f:labels":
		return "f:labels"
	case "f:annotations":
		return "f:annotations"
	case "f:finalizers":
		return "f:finalizers"
	case "f:ownerReferences":
		return "f:ownerReferences"
	case "f:spec":
		return "f:spec"
	case "f:status":
		return "f:status"
	case "f:replicas":
		return "f:replicas"
	case "f:image":
		return "f:image"
	case "f:strategy":
		return "f:strategy"
	case "f:conditions":
		return "f:conditions"
	case "involvedObject":
		return "involvedObject"
	case "reason":
		return "reason"
	case "message":
		return "message"
	case "source":
		return "source"
	case "component":
		return "component"
	case "host":
		return "host"
	case "reportingComponent":
		return "reportingComponent"
	case "reportingInstance":
		return "reportingInstance"
	case "firstTimestamp":
		return "firstTimestamp"
	case "lastTimestamp":
		return "lastTimestamp"
	case "eventTime":
		return "eventTime"
	case "count":
		return "count"
	case "severity":
		return "severity"
	case "Normal":
		return "Normal"
	case "Warning":
		return "Warning"
	case "Info":
		return "Info"
	case "Event":
		return "Event"
	case "lastTransitionTime":
		return "lastTransitionTime"
	case "True":
		return "True"
	case "False":
		return "False"
	case "Unknown":
		return "Unknown"
	case "true":
		return "true"
	case "false":
		return "false"
	}
	return nil
}

// Decode decodes data, one JSON value, as encoding/json's Decoder with UseNumber does: with
// Parse when it can, otherwise (and for every error) with encoding/json, whose answer it is
// either way.
func Decode(data []byte) (any, error) {
	if v, _, ok := Parse(data); ok {
		return v, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

// DecodeObject is Decode for a JSON object (or null, which gives nil): any other value is
// encoding/json's error of decoding it into a map.
func DecodeObject(data []byte) (map[string]any, error) {
	if v, _, ok := Parse(data); ok {
		if m, isMap := v.(map[string]any); isMap {
			return m, nil
		}
	}
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}
