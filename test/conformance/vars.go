package conformance

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Variables: {name} in a step's path, query, headers and body is replaced by the case's Vars,
// its namespaces' names and what earlier steps captured.

var varRE = regexp.MustCompile(`\{([A-Za-z_][A-Za-z0-9_]*)\}`)

// env maps variable names to values: strings, any YAML value for Vars, and captured values
// (literal: used as they are, never expanded).
type env map[string]any

// literal is a captured value.
type literal struct{ v any }

// expandString replaces every {name} in s, and the variables in a variable's value in turn (a
// row's coll names {ns}). A name that is not set is an error (a typo in a case), so that a
// request is never sent with a placeholder in it.
func (e env) expandString(s string) (string, error) {
	return e.expandDepth(s, 0)
}

func (e env) expandDepth(s string, depth int) (string, error) {
	if depth > 8 {
		return "", fmt.Errorf("variables nest too deep in %q", s)
	}
	var err error
	out := varRE.ReplaceAllStringFunc(s, func(m string) string {
		name := m[1 : len(m)-1]
		v, ok := e[name]
		if !ok {
			err = fmt.Errorf("variable {%s} is not set", name)
			return m
		}
		if l, ok := v.(literal); ok {
			if str, ok := l.v.(string); ok {
				return str
			}
			b, _ := json.Marshal(l.v)
			return string(b)
		}
		str, ok := v.(string)
		if !ok {
			b, _ := json.Marshal(v)
			str = string(b)
		}
		x, xerr := e.expandDepth(str, depth+1)
		if xerr != nil {
			err = xerr
		}
		return x
	})
	return out, err
}

// expand returns v with every string expanded. A string that is exactly "{name}" becomes the
// variable's value whatever its type (an object, a number), and a variable's value is expanded
// in turn (a template's object may name {ns}).
func (e env) expand(v any) (any, error) {
	switch v := v.(type) {
	case string:
		if m := varRE.FindStringSubmatch(v); m != nil && m[0] == v {
			val, ok := e[m[1]]
			if !ok {
				return nil, fmt.Errorf("variable {%s} is not set", m[1])
			}
			if l, ok := val.(literal); ok {
				return l.v, nil
			}
			if _, isString := val.(string); !isString {
				return e.expand(val)
			}
		}
		return e.expandString(v)
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			ek, err := e.expandString(k)
			if err != nil {
				return nil, err
			}
			if out[ek], err = e.expand(x); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			var err error
			if out[i], err = e.expand(x); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

// expandStep returns s with its path, query, headers and body expanded.
func (e env) expandStep(s Step) (Step, error) {
	out := s
	var err error
	if out.Path, err = e.expandString(s.Path); err != nil {
		return out, err
	}
	if s.Query != nil {
		q, err := e.expand(s.Query)
		if err != nil {
			return out, err
		}
		m, ok := q.(map[string]any)
		if !ok {
			return out, fmt.Errorf("query is %T, not a map", q)
		}
		strs := make(map[string]string, len(m))
		for k, v := range m {
			if str, isString := v.(string); isString {
				strs[k] = str
				continue
			}
			b, _ := json.Marshal(v) // limit: 2, watch: true
			strs[k] = string(b)
		}
		out.Query = strs
	}
	if s.Headers != nil {
		out.Headers = make(map[string]string, len(s.Headers))
		for k, v := range s.Headers {
			if out.Headers[k], err = e.expandString(v); err != nil {
				return out, err
			}
		}
	}
	if s.Body != nil {
		if out.Body, err = e.expand(s.Body); err != nil {
			return out, err
		}
	}
	if s.Merge != nil {
		patch, err := e.expand(s.Merge)
		if err != nil {
			return out, err
		}
		doc, _ := json.Marshal(out.Body)
		p, _ := json.Marshal(patch)
		merged, err := jsonpatch.MergePatch(doc, p)
		if err != nil {
			return out, fmt.Errorf("merge: %w", err)
		}
		out.Body, out.Merge = nil, nil
		if err := json.Unmarshal(merged, &out.Body); err != nil {
			return out, fmt.Errorf("merge: %w", err)
		}
	}
	if s.BodyText != "" {
		if out.BodyText, err = e.expandString(s.BodyText); err != nil {
			return out, err
		}
	}
	return out, nil
}

// lookup returns the value at path (dotted, see parsePath) in a decoded JSON tree. In a list, a
// segment key=value picks the first element whose member key is value.
func lookup(tree any, path string) (any, bool) {
	segs, err := parsePath(path)
	if err != nil {
		return nil, false
	}
	cur := tree
	for _, s := range segs {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[s]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if k, v, ok := strings.Cut(s, "="); ok {
				// name=configmaps: the first element whose member name is configmaps
				// (["metadata.name=apps"]: a path, when the member is nested).
				found := false
				for _, x := range c {
					if got, ok := lookup(x, k); ok && got == v {
						cur, found = x, true
						break
					}
				}
				if !found {
					return nil, false
				}
				continue
			}
			var i int
			if _, err := fmt.Sscanf(s, "%d", &i); err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
