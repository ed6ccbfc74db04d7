package cache

import (
	"context"
	"fmt"
	"strings"
)

// A restore replaces a store's whole content at once (Interface.Restore): the objects of a
// snapshot, taken from this store or another, with every uid, timestamp and finalizer as it
// was. Watchers cannot be carried over a change they did not see event by event, so they end
// with ErrGone, as when a watch cache is refilled from its source (WatchCache.Replace).

// Encode encodes obj as the store keeps it, at version 0 (without metadata.resourceVersion),
// for Restore. The store takes ownership of obj.
func (s *Store) Encode(key Key, obj map[string]any) (*Object, error) {
	if key.Name == "" {
		return nil, &Error{Err: ErrInvalid, Key: key, Field: "metadata.name", Message: "name or generateName is required"}
	}
	key = Key{Group: intern(key.Group), Resource: intern(key.Resource), Namespace: intern(key.Namespace), Name: strings.Clone(key.Name)}
	delete(metadataOf(obj), "resourceVersion")
	return s.build(key, obj)
}

// Restore replaces every object of the store with objects, each at the restore's one version
// (one change, one version: the counter + 1), and closes every watcher with ErrGone (see
// Interface). The objects are restamped with that version and indexed under the store's lock
// (what nothing else may see half done); their encodings and indexes are otherwise kept.
func (s *Store) Restore(_ context.Context, objects []*Object, _ RestoreOptions) (uint64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, newErr(ErrClosed, Key{}, "")
	}
	rv := s.rv + 1
	resources, err := s.index(objects, func(o *Object) (*Object, error) { return s.atVersion(o, rv) }, true)
	if err != nil {
		return 0, err
	}
	s.installLocked(resources, rv, restoredError(rv))
	return rv, nil
}

// CheckRestore returns an error wrapping ErrInvalid when objects cannot be restored together:
// one is nil or has no name, or two have the same key.
func CheckRestore(objects []*Object) error {
	seen := make(map[Key]struct{}, len(objects))
	for _, o := range objects {
		switch {
		case o == nil:
			return &Error{Err: ErrInvalid, Message: "a restore cannot hold a nil object"}
		case o.key.Name == "":
			return &Error{Err: ErrInvalid, Key: o.key, Field: "metadata.name", Message: "a restored object needs a name"}
		}
		if _, dup := seen[o.key]; dup {
			return &Error{Err: ErrInvalid, Key: o.key, Message: "the object is in the restore twice"}
		}
		seen[o.key] = struct{}{}
	}
	return nil
}

// restoredError is what the watchers open at a restore end with.
func restoredError(rv uint64) *Error {
	return &Error{Err: ErrGone, Message: fmt.Sprintf("the store was restored from a snapshot at version %d; list again", rv)}
}

// index returns objects by resource, namespace and name, each as stamp makes it (nil: as it
// is), for installLocked. strict makes a key given twice, or a nil or unnamed object, an error
// wrapping ErrInvalid (see CheckRestore); otherwise the last state of a key is kept and the
// others skipped. It reads nothing of c.
func (c *watchCache) index(objects []*Object, stamp func(*Object) (*Object, error), strict bool) (map[GroupResource]*resourceState, error) {
	resources := map[GroupResource]*resourceState{}
	for _, o := range objects {
		if o == nil || o.key.Name == "" {
			if !strict {
				continue
			}
			return nil, CheckRestore([]*Object{o})
		}
		gr := o.key.GroupResource()
		st := resources[gr]
		if st == nil {
			st = &resourceState{byNS: map[string]map[string]*Object{}}
			resources[gr] = st
		}
		ns := st.byNS[o.key.Namespace]
		if ns == nil {
			ns = map[string]*Object{}
			st.byNS[o.key.Namespace] = ns
		}
		if _, dup := ns[o.key.Name]; dup && strict {
			return nil, &Error{Err: ErrInvalid, Key: o.key, Message: "the object is in the restore twice"}
		}
		if stamp != nil {
			var err error
			if o, err = stamp(o); err != nil {
				return nil, err
			}
		}
		ns[o.key.Name] = o
	}
	return resources, nil
}

// replaceLocked sets the cache's whole content to objects, held at versions up to rv (see
// installLocked). A source holds each key once; were one there twice, its last state is kept.
func (c *watchCache) replaceLocked(objects []*Object, rv uint64, gone error) {
	resources, _ := c.index(objects, nil, false)
	c.installLocked(resources, rv, gone)
}

// installLocked makes resources the cache's whole content, at version rv, and forgets every
// history: the oldest version served becomes rv, so no watch or paged list resumes across the
// change. Open watchers cannot be carried over a change they did not see, so they are closed
// softly with gone (what they accepted before is still delivered, then the error: their
// clients list again).
func (c *watchCache) installLocked(resources map[GroupResource]*resourceState, rv uint64, gone error) {
	for w := range c.watchers {
		c.closeWatcherLocked(w, gone, true)
	}
	c.startRV, c.rv = rv, rv
	for _, st := range resources {
		st.history.init(c.cfg.WatchHistory, rv)
	}
	c.resources = resources
	c.historyBytes = 0
}

// atVersion returns o as held at version rv: an object from Encode (version 0) gains
// metadata.resourceVersion, a stored one has it replaced. It reads only o and c.cfg, so it
// needs no lock.
func (c *watchCache) atVersion(o *Object, rv uint64) (*Object, error) {
	if o.rv != 0 {
		return c.restamp(o, rv)
	}
	if raw, ok := insertVersion(o.raw, rv); ok {
		next := *o
		next.raw, next.rv, next.rvAt = raw, rv, 0
		return &next, nil
	}
	obj, err := o.Decode()
	if err != nil {
		return nil, err
	}
	metadataOf(obj)["resourceVersion"] = formatRV(rv)
	return c.build(o.key, obj)
}
