package cache

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/opemu/opemu/internal/jsonfast"
)

// build encodes obj and indexes it. obj must already carry the final metadata.
func (c *watchCache) build(key Key, obj map[string]any) (*Object, error) {
	o, bp, err := c.buildInScratch(key, obj)
	if err != nil {
		return nil, err
	}
	if bp != nil {
		o.raw = append([]byte(nil), o.raw...)
		c.putScratch(bp)
	}
	return o, nil
}

// buildInScratch is build with the encoding left in a scratch buffer, for a write that copies
// it once more anyway (withVersion, under the lock): the returned Object's raw aliases *bp and
// must not outlive putScratch(bp), which the caller calls when done with it. bp is nil when the
// encoding is not in scratch (encoding/json made it) and the Object owns raw.
func (c *watchCache) buildInScratch(key Key, obj map[string]any) (*Object, *[]byte, error) {
	bp, _ := c.scratch.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	raw, grown, inScratch, err := jsonfast.AppendMarshal(*bp, obj)
	*bp = grown
	if err != nil || !inScratch {
		c.putScratch(bp)
		bp = nil
	}
	if err != nil {
		return nil, nil, &Error{Err: ErrInvalid, Key: key, Message: "cannot encode object: " + err.Error()}
	}
	return c.indexed(key, obj, raw), bp, nil
}

// putScratch takes back a buffer of buildInScratch for reuse (nil: nothing to take).
func (c *watchCache) putScratch(bp *[]byte) {
	if bp != nil && cap(*bp) <= maxScratch {
		*bp = (*bp)[:0]
		c.scratch.Put(bp)
	}
}

// indexed returns the Object of obj encoded as raw.
func (c *watchCache) indexed(key Key, obj map[string]any, raw []byte) *Object {
	md := metadataOf(obj)
	rv, _ := ParseResourceVersion(stringField(md, "resourceVersion"))
	o := &Object{
		key:        key,
		raw:        raw,
		uid:        stringField(md, "uid"),
		rv:         rv,
		generation: int64Field(md, "generation"),
		deleting:   stringField(md, "deletionTimestamp") != "",
	}
	// The parts are gathered in a reused buffer, then copied out at their size: one
	// allocation per object.
	bp, _ := c.metaScratch.Get().(*[]string)
	if bp == nil {
		bp = new([]string)
	}
	m := appendPairsOfJSON((*bp)[:0], md["labels"])
	o.ends[0] = uint32(len(m))
	m = appendPairsOfJSON(m, md["annotations"])
	o.ends[1] = uint32(len(m))
	if c.cfg.SelectableFields != nil {
		m = c.cfg.SelectableFields(key.GroupResource(), obj, m)
		pairs(m[o.ends[1]:]).sort()
	}
	o.ends[2] = uint32(len(m))
	m = appendStrings(m, md["finalizers"])
	if len(m) > 0 {
		o.meta = slices.Clone(m)
	}
	clear(m) // the buffer must not keep the strings alive
	if cap(m) <= maxMetaScratch {
		*bp = m[:0]
		c.metaScratch.Put(bp)
	}
	return o
}

// maxScratch is the largest encoding buffer a watch cache keeps for reuse.
const maxScratch = 64 << 10

// maxMetaScratch is the largest metadata buffer a watch cache keeps for reuse.
const maxMetaScratch = 1 << 10

// SameSpec reports whether a and b agree on everything outside metadata and status (and
// apiVersion and kind): the part whose change bumps metadata.generation. Numbers compare as
// their JSON text, whatever Go type holds them, so an object stamped by Go code equals the
// same object decoded. The write path compares an update's next and current objects.
func SameSpec(a, b map[string]any) bool {
	n := 0
	for k, va := range a {
		if notSpec(k) {
			continue
		}
		vb, ok := b[k]
		if !ok || !sameJSON(va, vb) {
			return false
		}
		n++
	}
	for k := range b {
		if !notSpec(k) {
			n--
		}
	}
	return n == 0
}

func notSpec(k string) bool {
	return k == "metadata" || k == "status" || k == "apiVersion" || k == "kind"
}

// sameJSON reports whether a and b are the same JSON value (numbers by their JSON text).
func sameJSON(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		m, ok := b.(map[string]any)
		if !ok || len(m) != len(a) {
			return false
		}
		for k, v := range a {
			if w, ok := m[k]; !ok || !sameJSON(v, w) {
				return false
			}
		}
		return true
	case []any:
		l, ok := b.([]any)
		if !ok || len(l) != len(a) {
			return false
		}
		for i := range a {
			if !sameJSON(a[i], l[i]) {
				return false
			}
		}
		return true
	case string:
		s, ok := b.(string)
		return ok && s == a
	case bool:
		v, ok := b.(bool)
		return ok && v == a
	case nil:
		return b == nil
	}
	var bufA, bufB [32]byte
	ta, okA := appendNumber(bufA[:0], a)
	tb, okB := appendNumber(bufB[:0], b)
	return okA && okB && string(ta) == string(tb)
}

// appendNumber appends v's JSON text when v is a number (json.Number, or a Go number the write
// path or a Go caller put there).
func appendNumber(b []byte, v any) ([]byte, bool) {
	switch v := v.(type) {
	case json.Number:
		return append(b, v...), true
	case int64:
		return strconv.AppendInt(b, v, 10), true
	case int:
		return strconv.AppendInt(b, int64(v), 10), true
	case map[string]any, []any, string, bool, nil:
		return b, false
	}
	text, err := json.Marshal(v)
	return append(b, text...), err == nil
}
