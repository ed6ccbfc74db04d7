package cache

import (
	"sort"
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

// appendPairsOfJSON appends the string members of v, a decoded JSON object, to dst as pairs,
// interned and sorted, after what dst holds; other values are skipped.
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
	pairs(dst[start:]).sort()
	return dst
}

// sort sorts p by key where it is, allocating nothing: by insertion for the usual few labels
// or selectable fields, otherwise with sort.Sort moving whole pairs.
func (p pairs) sort() {
	if len(p) > 2*smallPairs {
		sort.Sort(byKey(p))
		return
	}
	for i := 2; i < len(p); i += 2 {
		for j := i; j > 0 && p[j] < p[j-2]; j -= 2 {
			p[j], p[j+1], p[j-2], p[j-1] = p[j-2], p[j-1], p[j], p[j+1]
		}
	}
}

// byKey sorts pairs by key, a pair at a time.
type byKey pairs

func (b byKey) Len() int           { return len(b) / 2 }
func (b byKey) Less(i, j int) bool { return b[2*i] < b[2*j] }
func (b byKey) Swap(i, j int) {
	b[2*i], b[2*i+1], b[2*j], b[2*j+1] = b[2*j], b[2*j+1], b[2*i], b[2*i+1]
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
