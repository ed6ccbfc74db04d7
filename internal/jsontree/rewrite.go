// Package jsontree walks decoded JSON trees (map[string]any, []any and leaves).
package jsontree

import (
	"maps"
	"slices"
)

// Rewrite returns v with every leaf (anything but an object or an array) replaced as leaf says:
// leaf returns the new value and whether it differs. Only the objects and arrays on the way to a
// changed leaf are copied; the rest, and v itself when nothing changed (changed false), is
// shared with v, so a caller that only reads the result may hand it v's own tree.
func Rewrite(v any, leaf func(any) (any, bool)) (_ any, changed bool) {
	switch v := v.(type) {
	case map[string]any:
		var out map[string]any // a copy, made at the first member that changes
		for k, e := range v {
			if n, ok := Rewrite(e, leaf); ok {
				if out == nil {
					out = maps.Clone(v)
				}
				out[k] = n
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		var out []any
		for i, e := range v {
			if n, ok := Rewrite(e, leaf); ok {
				if out == nil {
					out = slices.Clone(v)
				}
				out[i] = n
			}
		}
		if out == nil {
			return v, false
		}
		return out, true
	}
	return leaf(v)
}
