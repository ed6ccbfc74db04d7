package cache

import (
	"slices"
	"unique"
)

// pairs is a small string map kept as one slice, key, value, key, value, ..., sorted by key,
// with every string interned. Stored objects index their labels, annotations and selectable
// fields this way: a Go map per object costs a few hundred bytes and pointers the collector
// must scan, and the same keys and values repeat across thousands of objects. It implements
// labels.Labels and fields.Fields. Never modified after it is built.
type pairs []string

// intern returns the canonical copy of s, shared by every object holding the same text.
func intern(s string) string { return unique.Make(s).Value() }

// pairsOfJSON indexes the string values of a decoded JSON object; other values are skipped.
func pairsOfJSON(v any) pairs {
	p := appendPairsOfJSON(nil, v)
	if len(p) == 0 {
		return nil
	}
	return p
}

// appendPairsOfJSON appends pairsOfJSON(v) to dst: its pairs, interned and sorted, after
// what dst holds.
func appendPairsOfJSON(dst []string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return dst
	}
	start := len(dst)
	for k, v := range m {
		if s, ok := v.(string); ok {
			dst = append(dst, intern(k), intern(s))
		}
	}
	pairs(dst[start:]).sortInPlace()
	return dst
}

// sortInPlace sorts p by key where it is.
func (p pairs) sortInPlace() {
	if s := p.sorted(); len(s) > 0 && &s[0] != &p[0] {
		copy(p, s)
	}
}

// sorted returns p sorted by key; it may sort p in place (callers build p to sort it).
func (p pairs) sorted() pairs {
	if len(p) <= 2 {
		return p
	}
	if len(p) <= 2*smallPairs {
		// In place, by insertion: the usual few labels or selectable fields, no allocation.
		for i := 2; i < len(p); i += 2 {
			for j := i; j > 0 && p[j] < p[j-2]; j -= 2 {
				p[j], p[j+1], p[j-2], p[j-1] = p[j-2], p[j-1], p[j], p[j+1]
			}
		}
		return p
	}
	idx := make([]int, len(p)/2)
	for i := range idx {
		idx[i] = 2 * i
	}
	slices.SortFunc(idx, func(a, b int) int {
		switch {
		case p[a] < p[b]:
			return -1
		case p[a] > p[b]:
			return 1
		}
		return 0
	})
	out := make(pairs, 0, len(p))
	for _, i := range idx {
		out = append(out, p[i], p[i+1])
	}
	return out
}

// smallPairs is how many pairs sorted sorts in place by insertion.
const smallPairs = 16

// Lookup returns the value of key and whether it is present.
func (p pairs) Lookup(key string) (string, bool) {
	lo, hi := 0, len(p)/2
	for lo < hi {
		mid := (lo + hi) / 2
		switch k := p[2*mid]; {
		case k == key:
			return p[2*mid+1], true
		case k < key:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return "", false
}

// Has reports whether key is present.
func (p pairs) Has(key string) bool { _, ok := p.Lookup(key); return ok }

// Get returns the value of key, "" when absent.
func (p pairs) Get(key string) string { v, _ := p.Lookup(key); return v }

// Map returns a fresh map the caller owns; nil when empty.
func (p pairs) Map() map[string]string {
	if len(p) == 0 {
		return nil
	}
	m := make(map[string]string, len(p)/2)
	for i := 0; i < len(p); i += 2 {
		m[p[i]] = p[i+1]
	}
	return m
}

// objectFields is what a field selector sees of an object: its name and namespace from the
// key, the rest from the extra selectable fields.
type objectFields struct {
	key   *Key
	extra pairs
}

func (f objectFields) Has(field string) bool {
	switch field {
	case "metadata.name", "metadata.namespace":
		return true
	}
	return f.extra.Has(field)
}

func (f objectFields) Get(field string) string {
	switch field {
	case "metadata.name":
		return f.key.Name
	case "metadata.namespace":
		return f.key.Namespace
	}
	return f.extra.Get(field)
}
