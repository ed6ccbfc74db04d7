package cache

import (
	"bytes"
	"encoding/json"
	"strconv"
)

// The version splice: a shortcut of the write path and of the etcd feed. Every stored encoding
// holds metadata.resourceVersion, and giving an object a new version means encoding it again
// with that version (build, the general path). Instead, the new version is spliced into the
// encoding in place of the old one (withVersion: a create or an update encodes outside the
// store's lock with rvPlaceholder and takes its version under it), or inserted where
// encoding/json would put it (insertVersion: etcd's values are kept without it). When the
// splice cannot vouch for the result (the member is there twice, the encoding cannot be
// walked) the caller encodes again. FuzzVersionSplice holds every splice to that re-encoding;
// FuzzVersionFieldAt holds the search by digits to a search for the whole member.

// rvPlaceholder is the resourceVersion an object is encoded with outside the store's lock;
// withVersion puts the real one in its place under the lock.
const rvPlaceholder = "18446744073709551615"

var rvPlaceholderField = versionField(rvPlaceholder)

func versionField(rv string) []byte { return []byte(`"resourceVersion":"` + rv + `"`) }

// withVersion returns a copy of o, whose encoding holds resourceVersion from, as stored at
// version rv, by replacing the version in the encoding; nil when o is nil or its encoding holds
// that field text more than once (say, also as an annotation) and only a full encode is safe.
//
// It runs under the store's lock on every create, so it allocates only the new encoding.
func withVersion(o *Object, from string, rv uint64) *Object {
	if o == nil {
		return nil
	}
	var newBuf [64]byte
	i := -1
	if at := int(o.rvAt) - 1; at >= 0 && hasVersionFieldAt(o.raw, at, from) {
		i = at // where the store wrote it: no search, and no doubt which one it is
	} else if i = versionFieldAt(o.raw, from); i < 0 {
		return nil
	}
	old := len(versionFieldPrefix) + len(from) + 1
	nw := strconv.AppendUint(append(newBuf[:0], versionFieldPrefix...), rv, 10)
	nw = append(nw, '"')
	raw := make([]byte, 0, len(o.raw)-old+len(nw))
	raw = append(append(append(raw, o.raw[:i]...), nw...), o.raw[i+old:]...)
	next := *o
	next.rv = rv
	next.raw = raw
	next.rvAt = uint32(i + 1)
	return &next
}

// hasVersionFieldAt reports whether raw holds the member "resourceVersion":"<rv>" at at.
func hasVersionFieldAt(raw []byte, at int, rv string) bool {
	end := at + len(versionFieldPrefix) + len(rv)
	return end < len(raw) && string(raw[at:at+len(versionFieldPrefix)]) == versionFieldPrefix &&
		string(raw[at+len(versionFieldPrefix):end]) == rv && raw[end] == '"'
}

// versionFieldPrefix is how an encoded resourceVersion member begins.
const versionFieldPrefix = `"resourceVersion":"`

// versionFieldAt returns where raw holds the member "resourceVersion":"<rv>", or -1 when it
// holds it nowhere or more than once. It looks for the digits of rv, far rarer in JSON than
// the quote the member begins with (every string's), then checks what surrounds them.
func versionFieldAt(raw []byte, rv string) int {
	at, digits := -1, []byte(rv)
	for off := 0; off < len(raw); {
		j := bytes.Index(raw[off:], digits)
		if j < 0 {
			break
		}
		j += off
		end := j + len(rv)
		if j >= len(versionFieldPrefix) && string(raw[j-len(versionFieldPrefix):j]) == versionFieldPrefix && end < len(raw) && raw[end] == '"' {
			if at >= 0 {
				return -1
			}
			at = j - len(versionFieldPrefix)
		}
		off = j + 1
	}
	return at
}

// sameButVersion reports whether next (encoded with rvPlaceholder) equals cur (encoded at
// version curRV) in everything but the version.
func sameButVersion(next, cur []byte, curRV string) bool {
	i := versionFieldAt(next, rvPlaceholder)
	if i < 0 {
		return false // absent, or there twice: not worth comparing
	}
	curField := string(versionField(curRV))
	rest := next[i+len(rvPlaceholderField):]
	return len(cur) == i+len(curField)+len(rest) &&
		bytes.Equal(cur[:i], next[:i]) && string(cur[i:i+len(curField)]) == curField && bytes.Equal(cur[i+len(curField):], rest)
}

// Unchanged reports whether next (from Encode, version 0) is cur in everything but its version:
// an update that writes it would change nothing.
func Unchanged(next, cur *Object) bool {
	pos, how, ok := versionInsertPoint(next.raw)
	if !ok {
		return false
	}
	ins := versionInsert(how, formatRV(cur.rv))
	raw := cur.raw
	return len(raw) == len(next.raw)+len(ins) &&
		string(raw[:pos]) == string(next.raw[:pos]) &&
		string(raw[pos:pos+len(ins)]) == string(ins) &&
		string(raw[pos+len(ins):]) == string(next.raw[pos:])
}

// insertVersion returns raw, a JSON object without metadata.resourceVersion, with
// "resourceVersion":"<rv>" inserted among metadata's keys in sorted order (where encoding/json
// puts it), so every holder of the same value makes the same bytes. ok is false when raw has
// no metadata object, already has a resourceVersion, or is not JSON it can walk.
func insertVersion(raw []byte, rv uint64) ([]byte, bool) {
	pos, how, ok := versionInsertPoint(raw)
	if !ok {
		return nil, false
	}
	ins := versionInsert(how, formatRV(rv))
	out := make([]byte, 0, len(raw)+len(ins))
	out = append(out, raw[:pos]...)
	out = append(out, ins...)
	return append(out, raw[pos:]...), true
}

// Where the version field goes relative to metadata's other keys.
const (
	insertBefore = iota // before a key: the field, then a comma
	insertLast          // after the last key: a comma, then the field
	insertAlone         // into an empty metadata object
)

func versionInsert(how int, rv string) []byte {
	field := versionField(rv)
	switch how {
	case insertBefore:
		return append(field, ',')
	case insertLast:
		return append([]byte{','}, field...)
	}
	return field
}

// versionInsertPoint finds where resourceVersion goes in raw's metadata: before the first key
// that sorts after it, or before metadata's closing brace.
func versionInsertPoint(raw []byte) (pos int, how int, ok bool) {
	s := scanner{b: raw}
	if !s.consume('{') {
		return 0, 0, false
	}
	for first := true; ; first = false {
		if s.consume('}') {
			return 0, 0, false // no metadata
		}
		if !first && !s.consume(',') {
			return 0, 0, false
		}
		key, ok := s.str()
		if !ok || !s.consume(':') {
			return 0, 0, false
		}
		if key != "metadata" {
			if !s.skipValue() {
				return 0, 0, false
			}
			continue
		}
		if !s.consume('{') {
			return 0, 0, false
		}
		for mfirst := true; ; mfirst = false {
			s.space()
			if s.i < len(s.b) && s.b[s.i] == '}' {
				if mfirst {
					return s.i, insertAlone, true
				}
				return s.i, insertLast, true
			}
			if !mfirst && !s.consume(',') {
				return 0, 0, false
			}
			s.space()
			at := s.i
			mkey, ok := s.str()
			switch {
			case !ok:
				return 0, 0, false
			case mkey == "resourceVersion":
				return 0, 0, false
			case mkey > "resourceVersion":
				return at, insertBefore, true
			}
			if !s.consume(':') || !s.skipValue() {
				return 0, 0, false
			}
		}
	}
}

// scanner walks JSON just enough to find keys: strings, and the extent of any value.
type scanner struct {
	b []byte
	i int
}

func (s *scanner) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

// consume skips space and then c, reporting whether c was there.
func (s *scanner) consume(c byte) bool {
	s.space()
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str reads a string token and returns its value.
func (s *scanner) str() (string, bool) {
	s.space()
	start := s.i
	if !s.skipString() {
		return "", false
	}
	tok := s.b[start:s.i]
	for _, c := range tok[1 : len(tok)-1] {
		if c == '\\' {
			var v string
			if json.Unmarshal(tok, &v) != nil {
				return "", false
			}
			return v, true
		}
	}
	return string(tok[1 : len(tok)-1]), true
}

func (s *scanner) skipString() bool {
	if s.i >= len(s.b) || s.b[s.i] != '"' {
		return false
	}
	for s.i++; s.i < len(s.b); s.i++ {
		switch s.b[s.i] {
		case '\\':
			s.i++
		case '"':
			s.i++
			return true
		}
	}
	return false
}

// skipValue skips one value of any kind.
func (s *scanner) skipValue() bool {
	s.space()
	if s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		return s.skipString()
	case '{', '[':
		depth := 0
		for s.i < len(s.b) {
			switch s.b[s.i] {
			case '"':
				if !s.skipString() {
					return false
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					s.i++
					return true
				}
			}
			s.i++
		}
		return false
	}
	start := s.i
	for s.i < len(s.b) && s.b[s.i] != ',' && s.b[s.i] != '}' && s.b[s.i] != ']' && s.b[s.i] != ' ' && s.b[s.i] != '\n' && s.b[s.i] != '\t' && s.b[s.i] != '\r' {
		s.i++
	}
	return s.i > start
}
