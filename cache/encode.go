package cache

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"io"
	"slices"
	"strconv"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// build encodes obj and indexes it. obj must already carry the final metadata.
func (s *WatchCache) build(key Key, obj map[string]any) (*Object, error) {
	o, bp, err := s.buildInScratch(key, obj)
	if err != nil {
		return nil, err
	}
	if bp != nil {
		o.raw = append([]byte(nil), o.raw...)
		s.putScratch(bp)
	}
	return o, nil
}

// buildInScratch is build with the encoding left in a scratch buffer, for a write that copies
// it once more anyway (withVersion, under the lock): the returned Object's raw aliases *bp and
// must not outlive putScratch(bp), which the caller calls when done with it. bp is nil when the
// encoding is not in scratch (encoding/json made it) and the Object owns raw.
func (s *WatchCache) buildInScratch(key Key, obj map[string]any) (*Object, *[]byte, error) {
	bp, _ := s.scratch.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	raw, grown, inScratch, err := appendEncoding(*bp, obj)
	*bp = grown
	if err != nil || !inScratch {
		s.putScratch(bp)
		bp = nil
	}
	if err != nil {
		return nil, nil, &Error{Err: ErrInvalid, Key: key, Message: "cannot encode object: " + err.Error()}
	}
	return s.indexed(key, obj, raw), bp, nil
}

// putScratch takes back a buffer of buildInScratch for reuse (nil: nothing to take).
func (s *WatchCache) putScratch(bp *[]byte) {
	if bp != nil && cap(*bp) <= maxScratch {
		*bp = (*bp)[:0]
		s.scratch.Put(bp)
	}
}

// indexed returns the Object of obj encoded as raw.
func (s *WatchCache) indexed(key Key, obj map[string]any, raw []byte) *Object {
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
	bp, _ := s.metaScratch.Get().(*[]string)
	if bp == nil {
		bp = new([]string)
	}
	m := appendPairsOfJSON((*bp)[:0], md["labels"])
	o.ends[0] = uint32(len(m))
	m = appendPairsOfJSON(m, md["annotations"])
	o.ends[1] = uint32(len(m))
	if s.cfg.SelectableFields != nil {
		m = s.cfg.SelectableFields(key.GroupResource(), obj, m)
		pairs(m[o.ends[1]:]).sortInPlace()
	}
	o.ends[2] = uint32(len(m))
	m = appendStrings(m, md["finalizers"])
	if len(m) > 0 {
		o.meta = slices.Clone(m)
	}
	clear(m) // the buffer must not keep the strings alive
	if cap(m) <= maxMetaScratch {
		*bp = m[:0]
		s.metaScratch.Put(bp)
	}
	return o
}

// maxMetaScratch is the largest metadata buffer a WatchCache keeps for reuse.
const maxMetaScratch = 1 << 10

// specSeed seeds SpecHash: a process-wide constant once chosen, so the hashes of one process
// compare equal (they are never stored or sent).
var specSeed = maphash.MakeSeed()

// SpecHash hashes everything outside metadata and status (and apiVersion and kind): the part
// whose change bumps metadata.generation. It walks the decoded object (keys in sorted order,
// numbers as their JSON text), so equal JSON hashes equal without encoding it a second time.
// The write path compares the hashes of an update's next and current objects, both decoded;
// the store does not keep it (most objects are never updated).
func SpecHash(obj map[string]any) uint64 {
	var h maphash.Hash
	h.SetSeed(specSeed)
	var small [16]string // on the stack for the usual handful of fields
	keys := small[:0]
	for k := range obj {
		if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		h.WriteString(k)
		h.WriteByte(0)
		hashValue(&h, obj[k])
	}
	return h.Sum64()
}

// hashValue writes v to h with a type tag, so "1" and 1, or {} and [], differ.
func hashValue(h *maphash.Hash, v any) {
	switch v := v.(type) {
	case nil:
		h.WriteByte('n')
	case bool:
		if v {
			h.WriteByte('t')
		} else {
			h.WriteByte('f')
		}
	case string:
		h.WriteByte('s')
		h.WriteString(v)
		h.WriteByte(0)
	case json.Number:
		h.WriteByte('#')
		h.WriteString(string(v))
		h.WriteByte(0)
	case []any:
		h.WriteByte('[')
		for _, e := range v {
			hashValue(h, e)
		}
		h.WriteByte(']')
	case map[string]any:
		h.WriteByte('{')
		var small [16]string
		keys := small[:0]
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			h.WriteString(k)
			h.WriteByte(0)
			hashValue(h, v[k])
		}
		h.WriteByte('}')
	case int64: // stamped by the write path (generation, an Event's count)
		h.WriteByte('#')
		var buf [20]byte
		h.Write(strconv.AppendInt(buf[:0], v, 10))
		h.WriteByte(0)
	default:
		// Other numbers (int, float64 from Go callers): their JSON text, as json.Number has.
		b, _ := json.Marshal(v)
		h.WriteByte('#')
		h.Write(b)
		h.WriteByte(0)
	}
}
