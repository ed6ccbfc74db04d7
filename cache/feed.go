package cache

import (
	"context"
	"fmt"
)

// WatchCache is a watch cache whose truth lives elsewhere (package etcd), as kube-apiserver's
// cacher is: it serves Get, List, Watch, CheckResourceVersion and Counts like Store, and is fed
// the changes observed at the source, in the source's order, at the versions they got there
// (Apply, Advance, Replace), which its readers may wait for (WaitUntil). Objects are kept at the
// source as their JSON without metadata.resourceVersion (Encode, Stored), and held here at the
// version the source gave their write (AtVersion). A WatchCache is safe for concurrent use.
type WatchCache struct {
	watchCache
}

// NewWatchCache returns an empty watch cache for a store whose truth lives elsewhere. Its
// resourceVersion and StartResourceVersion are cfg.StartResourceVersion (the version the
// source stood at when the cache was filled, see Replace); zero means 1.
func NewWatchCache(cfg Config) *WatchCache {
	if cfg.StartResourceVersion == 0 {
		cfg.StartResourceVersion = 1
	}
	c := &WatchCache{}
	c.init(cfg)
	return c
}

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

// EndWatches closes, with ErrClosed, the watchers of gr alone (as DropResource does), for a
// resource that stopped being served elsewhere (its CRD was deleted through another replica).
func (c *WatchCache) EndWatches(gr GroupResource) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endWatchesLocked(gr)
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
			o, err := c.restamp(prev, ch.ResourceVersion)
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
	c.replaceLocked(objects, rv, &Error{Err: ErrGone, Message: fmt.Sprintf("the watch cache was refilled from its source at version %d; list again", rv)})
	c.wakeLocked()
	return nil
}

// Restored is Replace after a restore at the source (a snapshot replaced everything there):
// the same refill, whose watchers end with the restore's ErrGone.
func (c *WatchCache) Restored(objects []*Object, rv uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return newErr(ErrClosed, Key{}, "")
	}
	c.replaceLocked(objects, rv, restoredError(rv))
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
func (c *watchCache) wakeLocked() {
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
func (c *WatchCache) AtVersion(o *Object, rv uint64) (*Object, error) { return c.atVersion(o, rv) }

// Check returns an error wrapping ErrConflict when cur does not satisfy pre.
func (pre Preconditions) Check(key Key, cur *Object) error { return checkPreconditions(key, cur, pre) }
