package conformance

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
)

// Paths name a place in an answer: segments joined by dots, a segment that is not a plain word
// written as a JSON string in brackets, list indexes as numbers:
//
//	steps.0.body.metadata.annotations["k8s.io/initial-events-end"]
//
// In a pattern (declared differences), * in a segment stands for any characters (a segment *
// is any one segment), and a pattern covers every path that starts with what it matches.

var plainSegment = regexp.MustCompile(`^[A-Za-z0-9_\-$]+$`)

// parsePath splits a path into its segments.
func parsePath(p string) ([]string, error) {
	var segs []string
	for i := 0; i < len(p); {
		switch {
		case p[i] == '.':
			if i == 0 || i == len(p)-1 {
				return nil, fmt.Errorf("path %q: a dot at an end", p)
			}
			i++
			if p[i] == '.' {
				return nil, fmt.Errorf("path %q: an empty segment", p)
			}
		case p[i] == '[':
			// A JSON string, then ]: find the string's closing quote past its escapes.
			j := i + 2
			for j < len(p) && p[j] != '"' {
				if p[j] == '\\' {
					j++
				}
				j++
			}
			if i+1 >= len(p) || p[i+1] != '"' || j+1 >= len(p) || p[j+1] != ']' {
				return nil, fmt.Errorf("path %q: a [ without a JSON string and ]", p)
			}
			var s string
			if err := json.Unmarshal([]byte(p[i+1:j+1]), &s); err != nil {
				return nil, fmt.Errorf("path %q: %w", p, err)
			}
			segs = append(segs, s)
			i = j + 2
		default:
			j := i
			for j < len(p) && p[j] != '.' && p[j] != '[' {
				j++
			}
			segs = append(segs, p[i:j])
			i = j
		}
	}
	if len(segs) == 0 {
		return nil, fmt.Errorf("empty path")
	}
	return segs, nil
}

// FormatPath joins segments as parsePath reads them.
func FormatPath(segs []string) string { return formatPath(segs) }

func formatPath(segs []string) string {
	var b strings.Builder
	for i, s := range segs {
		if plainSegment.MatchString(s) {
			if i > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s)
			continue
		}
		q, _ := json.Marshal(s)
		b.WriteByte('[')
		b.Write(q)
		b.WriteByte(']')
	}
	return b.String()
}

// pattern is a parsed path pattern.
type pattern []string

func parsePattern(p string) (pattern, error) {
	segs, err := parsePath(p)
	return pattern(segs), err
}

// covers reports whether the pattern matches path or a path it starts with.
func (p pattern) covers(path []string) bool {
	if len(p) > len(path) {
		return false
	}
	for i, s := range p {
		if !globMatch(s, path[i]) {
			return false
		}
	}
	return true
}

// globMatch reports whether s matches pattern, where * stands for any characters (none too).
func globMatch(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, part := range parts[1 : len(parts)-1] {
		i := strings.Index(s, part)
		if i < 0 {
			return false
		}
		s = s[i+len(part):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}

func (p pattern) String() string { return formatPath(p) }
