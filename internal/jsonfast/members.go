package jsonfast

import (
	"bytes"
	"slices"
)

// Reading and cutting the top-level members of an encoded object without decoding it: a list
// of built-in objects leaves out each item's apiVersion and kind, and a metadata-only answer
// takes each object's metadata, straight from the stored bytes. data must be a JSON object
// without repeated keys, as the store encodes them: the walk reads only as far as it needs
// and copies the rest as it is. ok is false when it meets what it does not vouch for (a key
// holding an escape, which could spell a key two ways; a syntax error on its way), and the
// caller decodes with encoding/json instead. FuzzMembers holds both to a decoding.

// Member returns the value of the top-level member key of the JSON object data, as written
// there (it shares data's memory). found is false when data has no such member.
func Member(data []byte, key string) (value []byte, found, ok bool) {
	ok = walkMembers(data, func(m member) bool {
		if string(m.key) == key {
			value, found = data[m.valueStart:m.end], true
			return false
		}
		return true
	})
	return value, found, ok
}

// AppendWithout appends the JSON object data to dst without its top-level members named in
// drop (at most 4): the object encoding/json would write with those keys deleted, when data is
// compact as the store writes it. ok is false when the walk cannot vouch for data; dst is then
// returned as it was.
func AppendWithout(dst, data []byte, drop ...string) (_ []byte, ok bool) {
	if len(drop) > 4 {
		return dst, false
	}
	var cuts [4][2]int // [from, to) of data to leave out, in order
	n, left := 0, len(drop)
	keptEnd := -1 // where the last member kept so far ends (-1: none yet)
	ok = walkMembers(data, func(m member) bool {
		if !slices.Contains(drop, string(m.key)) {
			keptEnd = m.end
			return true
		}
		left--
		if !m.last {
			// The member and the comma after it: the next member takes its place.
			cuts[n] = [2]int{m.start, m.next}
			n++
			return left > 0
		}
		// The last member: the comma before it goes too, from the end of the last member
		// kept (every cut since then lies inside).
		from := m.open
		if keptEnd >= 0 {
			from = keptEnd
		}
		for n > 0 && cuts[n-1][0] >= from {
			n--
		}
		cuts[n] = [2]int{from, m.end}
		n++
		return false
	})
	if !ok {
		return dst, false
	}
	at := 0
	for _, c := range cuts[:n] {
		dst = append(dst, data[at:c[0]]...)
		at = c[1]
	}
	return append(dst, data[at:]...), true
}

// member is one top-level member met by walkMembers.
type member struct {
	key               []byte // as written between the quotes
	start, valueStart int    // where the member (its key's quote) and its value begin
	end               int    // where its value ends
	next              int    // where the next member begins (after the comma and space)
	last              bool   // no member follows
	open              int    // where the object's content begins (after '{')
}

// walkMembers calls fn for each top-level member of the JSON object data, in order, until fn
// returns false or the object ends. It reports false when it meets what it cannot vouch for on
// its way: a syntax error, or a key holding an escape.
func walkMembers(data []byte, fn func(member) bool) bool {
	s := walker{b: data}
	s.space()
	if !s.consume('{') {
		return false
	}
	open := s.i
	s.space()
	if s.consume('}') {
		return true
	}
	for {
		s.space()
		m := member{start: s.i, open: open}
		if !s.str() {
			return false
		}
		m.key = s.b[m.start+1 : s.i-1]
		if bytes.IndexByte(m.key, '\\') >= 0 {
			return false
		}
		s.space()
		if !s.consume(':') {
			return false
		}
		s.space()
		m.valueStart = s.i
		if !s.value(0) {
			return false
		}
		m.end = s.i
		s.space()
		switch {
		case s.consume(','):
			s.space()
			m.next = s.i
		case s.consume('}'):
			m.last = true
		default:
			return false
		}
		if !fn(m) || m.last {
			return true
		}
	}
}

// walker reads just enough JSON to find values' extents. Values are checked only as far as
// finding their end needs; Member and AppendWithout copy them as they are.
type walker struct {
	b []byte
	i int
}

func (s *walker) space() {
	for s.i < len(s.b) && (s.b[s.i] == ' ' || s.b[s.i] == '\t' || s.b[s.i] == '\n' || s.b[s.i] == '\r') {
		s.i++
	}
}

func (s *walker) consume(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

// str skips a string token.
func (s *walker) str() bool {
	if !s.consume('"') {
		return false
	}
	for s.i < len(s.b) {
		switch c := s.b[s.i]; {
		case c == '\\':
			s.i += 2
		case c == '"':
			s.i++
			return true
		case c < 0x20:
			return false
		default:
			s.i++
		}
	}
	return false
}

// value skips one value of any kind.
func (s *walker) value(depth int) bool {
	if depth > maxParseDepth || s.i >= len(s.b) {
		return false
	}
	switch s.b[s.i] {
	case '"':
		return s.str()
	case '{':
		s.i++
		s.space()
		if s.consume('}') {
			return true
		}
		for {
			s.space()
			if !s.str() {
				return false
			}
			s.space()
			if !s.consume(':') {
				return false
			}
			s.space()
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.consume(',') {
				continue
			}
			return s.consume('}')
		}
	case '[':
		s.i++
		s.space()
		if s.consume(']') {
			return true
		}
		for {
			s.space()
			if !s.value(depth + 1) {
				return false
			}
			s.space()
			if s.consume(',') {
				continue
			}
			return s.consume(']')
		}
	}
	start := s.i
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return s.i > start && literal(s.b[start:s.i])
		}
		s.i++
	}
	return s.i > start && literal(s.b[start:s.i])
}

// literal reports whether b is true, false, null or a number's characters (its syntax is left
// to the decoding that checks the document where it matters).
func literal(b []byte) bool {
	switch string(b) {
	case "true", "false", "null":
		return true
	}
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E') {
			return false
		}
	}
	return true
}
