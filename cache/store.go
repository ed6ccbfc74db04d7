package cache

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"time"
)

// Config configures a Store. The zero value is ready to use.
type Config struct {
	// WatchHistory is how many watch events are kept per resource for resuming a watch from a
	// resourceVersion. Zero means 10000.
	WatchHistory int
	// WatchHistoryBytes bounds the watch history of every resource together, in bytes of the
	// events' encoded objects (see eventSize), so churn of large objects cannot pin memory
	// after the objects are gone. Beyond it the oldest events of the largest history go first.
	// Zero means DefaultWatchHistoryBytes.
	WatchHistoryBytes int64
	// WatchBuffer is how many undelivered events a watcher may hold, beyond its initial replay,
	// before it is closed with ErrTooSlow. Zero means 1024.
	WatchBuffer int
	// StartResourceVersion is the counter's first value. Zero means the current time in
	// microseconds since the epoch, so versions from an earlier run are older than this run's.
	// For a WatchCache (fed from elsewhere) it is the version its source stood at (NewWatchCache).
	StartResourceVersion uint64
	// SelectableFields appends the extra field-selector fields of an object (beyond
	// metadata.name and metadata.namespace), e.g. involvedObject.name for Events, to dst as
	// name, value, name, value, ... (dst may be nil) and returns it. It is called on every
	// write with the decoded object; it must not keep or modify it. The names must be strings
	// that live as long as the store (they are kept as they are). Nil means none.
	SelectableFields func(gr GroupResource, obj map[string]any, dst []string) []string
}

// DefaultWatchHistoryBytes is Config.WatchHistoryBytes when unset: 128 MiB.
const DefaultWatchHistoryBytes = 128 << 20

// Store is the in-memory implementation of Interface: the source of truth and its own watch
// cache. Its reads, watches and versions are its watch cache's (watchcache.go); its writes
// check, encode and commit into that watch cache under its lock. See the package doc for its
// guarantees.
type Store struct {
	watchCache
}

// New returns an empty store.
func New(cfg Config) *Store {
	if cfg.StartResourceVersion == 0 {
		cfg.StartResourceVersion = uint64(time.Now().UnixMicro())
	}
	s := &Store{}
	s.init(cfg)
	return s
}

// Create stores obj at key (see Interface). The object is encoded outside the lock with a
// placeholder version, which is replaced by the real one under it.
func (s *Store) Create(_ context.Context, key Key, obj map[string]any, opts WriteOptions) (*Object, error) {
	if key.Name == "" {
		return nil, &Error{Err: ErrInvalid, Key: key, Field: "metadata.name", Message: "name or generateName is required"}
	}
	// The key outlives the request: share the repeated parts, and copy the name so it does not
	// hold on to the request's buffers.
	key = Key{Group: intern(key.Group), Resource: intern(key.Resource), Namespace: intern(key.Namespace), Name: strings.Clone(key.Name)}
	md := metadataOf(obj)
	if opts.DryRun {
		delete(md, "resourceVersion")
	} else {
		md["resourceVersion"] = rvPlaceholder
	}
	// pre's encoding stays in scratch until withVersion copies it out (or a dry run does).
	pre, bp, err := s.buildInScratch(key, obj)
	if err != nil {
		return nil, err
	}
	defer s.putScratch(bp)
	return s.commitNew(key, pre, opts.DryRun, func(rv uint64) (*Object, error) {
		md["resourceVersion"] = formatRV(rv)
		return s.build(key, obj)
	})
}

// commitNew stores pre (encoded with rvPlaceholder) at key unless something is there: under the
// lock it takes the next version and puts it in pre's encoding, or, when that cannot be done
// in place (the placeholder is there twice), asks encode for the object at that version. A dry
// run returns pre with a copy of its encoding.
func (s *Store) commitNew(key Key, pre *Object, dryRun bool, encode func(rv uint64) (*Object, error)) (*Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, newErr(ErrClosed, key, "")
	}
	if s.getLocked(key) != nil {
		return nil, newErr(ErrAlreadyExists, key, "")
	}
	if dryRun {
		pre.raw = bytes.Clone(pre.raw)
		return pre, nil
	}
	o := withVersion(pre, rvPlaceholder, s.rv+1)
	if o == nil {
		var err error
		if o, err = encode(s.rv + 1); err != nil {
			return nil, err
		}
	}
	s.commitLocked(Added, o, nil)
	return o, nil
}

// checkPreconditions returns ErrConflict when cur does not satisfy pre.
func checkPreconditions(key Key, cur *Object, pre Preconditions) error {
	if pre.UID != "" && pre.UID != cur.uid {
		return newErr(ErrConflict, key, "the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", pre.UID, cur.uid)
	}
	if pre.ResourceVersion != "" && pre.ResourceVersion != formatRV(cur.rv) {
		return newErr(ErrConflict, key, "the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%d). The object might have been modified", pre.ResourceVersion, cur.rv)
	}
	return nil
}

// GuaranteedUpdate updates or removes the object at key as try says (see Interface). It is
// optimistic: try runs and the result is encoded outside the lock; under the lock the write
// commits if the object is still the one try saw, and otherwise the loop runs again.
func (s *Store) GuaranteedUpdate(ctx context.Context, key Key, pre Preconditions, try UpdateFunc, opts WriteOptions) (*Object, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		s.mu.RLock()
		closed, cur := s.closed, s.getLocked(key)
		s.mu.RUnlock()
		if closed {
			return nil, newErr(ErrClosed, key, "")
		}
		if cur == nil {
			return nil, newErr(ErrNotFound, key, "")
		}
		if err := checkPreconditions(key, cur, pre); err != nil {
			return nil, err
		}
		u, err := try(cur)
		if err != nil {
			return nil, err
		}
		var next *Object // the encoded next state, with rvPlaceholder (nil: cur's own bytes)
		var bp *[]byte   // the scratch buffer next's encoding is in, if any
		if u.Object != nil {
			md := metadataOf(u.Object)
			if opts.DryRun {
				md["resourceVersion"] = formatRV(cur.rv)
				o, err := s.build(cur.key, u.Object)
				switch {
				case err != nil:
					return nil, err
				case u.Remove || bytes.Equal(o.raw, cur.raw):
					return cur, nil
				}
				return o, nil
			}
			md["resourceVersion"] = rvPlaceholder
			// next's encoding stays in scratch until withVersion copies it out.
			if next, bp, err = s.buildInScratch(cur.key, u.Object); err != nil {
				return nil, err
			}
			if !u.Remove && sameButVersion(next.raw, cur.raw, formatRV(cur.rv)) {
				s.putScratch(bp)
				return cur, nil
			}
		} else if !u.Remove || opts.DryRun {
			return cur, nil
		}
		s.mu.Lock()
		if s.closed || s.getLocked(key) != cur {
			s.mu.Unlock()
			s.putScratch(bp)
			continue
		}
		var stamped *Object
		if next != nil {
			stamped = withVersion(next, rvPlaceholder, s.rv+1)
			if stamped == nil {
				metadataOf(u.Object)["resourceVersion"] = formatRV(s.rv + 1)
				stamped, err = s.build(cur.key, u.Object)
			}
		} else {
			stamped, err = s.restamp(cur, s.rv+1)
		}
		s.putScratch(bp) // next is not used beyond this point
		if err != nil {
			s.mu.Unlock()
			return nil, err
		}
		if u.Remove {
			s.commitLocked(Deleted, stamped, cur)
		} else {
			s.commitLocked(Modified, stamped, cur)
		}
		s.mu.Unlock()
		return stamped, nil
	}
}

// Delete removes the object at key if pre holds (see Interface). A dry run returns the object
// as it is.
func (s *Store) Delete(_ context.Context, key Key, pre Preconditions, opts WriteOptions) (*Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, newErr(ErrClosed, key, "")
	}
	cur := s.getLocked(key)
	if cur == nil {
		return nil, newErr(ErrNotFound, key, "")
	}
	if err := checkPreconditions(key, cur, pre); err != nil {
		return nil, err
	}
	if opts.DryRun {
		return cur, nil
	}
	o, err := s.restamp(cur, s.rv+1)
	if err != nil {
		return nil, err
	}
	s.commitLocked(Deleted, o, cur)
	return o, nil
}

// DropResource removes every object of gr at once (a DELETED event each, finalizers
// notwithstanding) and ends the watches on gr alone, as deleting a CRD does. It returns how
// many objects went.
func (s *Store) DropResource(_ context.Context, gr GroupResource) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, newErr(ErrClosed, Key{Group: gr.Group, Resource: gr.Resource}, "")
	}
	st := s.resources[gr]
	n := 0
	if st != nil {
		var all []*Object
		for _, m := range st.byNS {
			for _, o := range m {
				all = append(all, o)
			}
		}
		// In key order, so the DELETED events come out the same way every time.
		slices.SortFunc(all, func(a, b *Object) int { return CompareKeys(a.key.Namespace, a.key.Name, b.key.Namespace, b.key.Name) })
		for _, cur := range all {
			o, err := s.restamp(cur, s.rv+1)
			if err != nil {
				return n, err
			}
			s.commitLocked(Deleted, o, cur)
			n++
		}
	}
	s.endWatchesLocked(gr)
	return n, nil
}
