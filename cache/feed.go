package cache

import (
	"context"
	"encoding/json"
	"fmt"
)

// What a store whose truth lives elsewhere (etcd) uses to keep a WatchCache: objects are kept
// at the source as their JSON without metadata.resourceVersion (Encode, Stored), the cache
// holds them at the version the source gave their write (AtVersion), and the changes the source
// reports are applied in its order (Apply, Advance, Replace). Store never calls these.

// Change is one write observed at the source, for Apply.
type Change struct {
	// Key is the object written.
	Key Key
	// Object is its new state at ResourceVersion (from Stored or AtVersion); nil removes the
	// object: a DELETED event carrying its last state, restamped at ResourceVersion.
	Object *Object
	// ResourceVersion is the write's version at the source. Several changes may share one
	// (one transaction at the source).
	ResourceVersion uint64
}

// Apply applies changes in order, each at its version: an object the cache does not hold
// arrives as ADDED, one it holds as MODIFIED, a removal as DELETED; a removal of an object the
// cache does not hold only moves the version. A change older than the cache's version is
// ignored (the source repeated it). Waiters of WaitUntil wake.
func (c *WatchCache) Apply(changes []Change) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return newErr(ErrClosed, Key{}, "")
	}
	defer c.wakeLocked()
	for _, ch := range changes {
		if ch.ResourceVersion < c.rv {
			continue
		}
		prev := c.getLocked(ch.Key)
		switch {
		case ch.Object != nil && prev == nil:
			c.applyLocked(Added, ch.Object, nil, ch.ResourceVersion)
		case ch.Object != nil:
			c.applyLocked(Modified, ch.Object, prev, ch.ResourceVersion)
		case prev != nil:
			o, err := c.restampLocked(prev, ch.ResourceVersion)
			if err != nil {
				return err
			}
			c.applyLocked(Deleted, o, prev, ch.ResourceVersion)
		}
		c.rv = ch.ResourceVersion
	}
	return nil
}

// Advance moves the cache's version to rv without a change (the source says nothing the cache
// watches changed up to rv). Waiters of WaitUntil wake.
func (c *WatchCache) Advance(rv uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if rv > c.rv {
		c.rv = rv
		c.wakeLocked()
	}
}

// Replace sets the cache's whole content to objects, as the source held them at version rv,
// and forgets every history: the oldest version served becomes rv. Open watchers cannot be
// carried over a gap they did not see, so they are closed with an error wrapping ErrGone (their
// clients list again). A cache is filled the first time the same way.
func (c *WatchCache) Replace(objects []*Object, rv uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return newErr(ErrClosed, Key{}, "")
	}
	gone := &Error{Err: ErrGone, Message: fmt.Sprintf("the watch cache was refilled from its source at version %d; list again", rv)}
	for w := range c.watchers {
		// Softly: what a watcher accepted before the gap is still delivered, then the 410.
		c.closeWatcherLocked(w, gone, true)
	}
	c.startRV, c.rv = rv, rv
	c.resources = map[GroupResource]*resourceState{}
	c.historyBytes = 0
	for _, o := range objects {
		st := c.stateLocked(o.key.GroupResource())
		ns := st.byNS[o.key.Namespace]
		if ns == nil {
			ns = map[string]*Object{}
			st.byNS[o.key.Namespace] = ns
		}
		ns[o.key.Name] = o
	}
	c.wakeLocked()
	return nil
}

// WaitUntil returns once the cache holds version rv (nil), when ctx ends (its error) or when
// the cache closes (ErrClosed).
func (c *WatchCache) WaitUntil(ctx context.Context, rv uint64) error {
	for {
		c.mu.Lock()
		switch {
		case c.rv >= rv:
			c.mu.Unlock()
			return nil
		case c.closed:
			c.mu.Unlock()
			return newErr(ErrClosed, Key{}, "")
		}
		if c.fed == nil {
			c.fed = make(chan struct{})
		}
		ch := c.fed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// wakeLocked wakes the waiters of WaitUntil.
func (c *WatchCache) wakeLocked() {
	if c.fed != nil {
		close(c.fed)
		c.fed = nil
	}
}

// Encode encodes obj as the source keeps it, without metadata.resourceVersion (removed from
// obj), and indexes it. The result has version 0; its Raw is the value to store, and AtVersion
// makes the object as held at the version the source gives the write. The caller gives up obj.
func (c *WatchCache) Encode(key Key, obj map[string]any) (*Object, error) {
	delete(metadataOf(obj), "resourceVersion")
	return c.build(key, obj)
}

// Stored returns the object at key whose value at the source is value (its JSON without
// resourceVersion), as of version rv.
func (c *WatchCache) Stored(key Key, value []byte, rv uint64) (*Object, error) {
	obj, err := DecodeJSON(value)
	if err != nil {
		return nil, &Error{Err: ErrInvalid, Key: key, Message: "stored value is not a JSON object: " + err.Error()}
	}
	if raw, ok := insertVersion(value, rv); ok {
		metadataOf(obj)["resourceVersion"] = formatRV(rv)
		return c.indexed(key, obj, raw), nil
	}
	metadataOf(obj)["resourceVersion"] = formatRV(rv)
	return c.build(key, obj)
}

// AtVersion returns o as held at version rv: an encoded object of version 0 (Encode) gains
// metadata.resourceVersion, a stored one has it replaced.
func (c *WatchCache) AtVersion(o *Object, rv uint64) (*Object, error) {
	if o.rv != 0 {
		return c.restampLocked(o, rv) // restampLocked reads only o and c.cfg
	}
	if raw, ok := insertVersion(o.raw, rv); ok {
		next := *o
		next.raw, next.rv = raw, rv
		return &next, nil
	}
	obj, err := o.Decode()
	if err != nil {
		return nil, err
	}
	metadataOf(obj)["resourceVersion"] = formatRV(rv)
	return c.build(o.key, obj)
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

// Check returns an error wrapping ErrConflict when cur does not satisfy pre.
func (pre Preconditions) Check(key Key, cur *Object) error { return checkPreconditions(key, cur, pre) }

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
