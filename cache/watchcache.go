package cache

import (
	"context"
	"sync"
)

// watchCache is the read side every store shares: the objects of every resource in an index
// (by namespace, then name), the current resourceVersion, each resource's watch history and
// the open watchers. It serves Get, List, Watch, CheckResourceVersion and Counts, which the
// stores embedding it promote.
//
// It is fed in one of two ways, never both:
//   - Store (in memory) commits each of its own writes into it under its lock, taking the next
//     version of its own counter (+1 per write: commitLocked);
//   - WatchCache, for a store whose truth lives elsewhere (package etcd), applies the changes
//     observed there, at the versions they were given there (feed.go).
//
// Either way events leave in version order, each exactly once, to every matching watcher, and
// writers never wait for watchers. It is safe for concurrent use.
type watchCache struct {
	cfg     Config
	startRV uint64
	// scratch holds encoding buffers (*[]byte) reused by build across writes, so encoding an
	// object allocates only its stored bytes.
	scratch sync.Pool
	// metaScratch holds buffers (*[]string) reused by indexed to gather an object's metadata.
	metaScratch sync.Pool

	// mu guards everything below. Writers hold it exclusively while they apply a write, append
	// it to history and hand it to watchers (non-blocking sends only), so events are ordered.
	mu        sync.RWMutex
	rv        uint64
	resources map[GroupResource]*resourceState
	watchers  map[*Watcher]struct{}
	closed    bool
	// historyBytes is the sum of every resource's history.bytes.
	historyBytes int64
	// fed is closed (and cleared) whenever a WatchCache moves forward, waking WaitUntil; nil
	// until someone waits. Store's commits never touch it.
	fed chan struct{}
}

// resourceState is one resource's objects (by namespace, then name) and watch history.
type resourceState struct {
	byNS    map[string]map[string]*Object
	history history
}

func (c *watchCache) init(cfg Config) {
	if cfg.WatchHistory <= 0 {
		cfg.WatchHistory = 10000
	}
	if cfg.WatchHistoryBytes <= 0 {
		cfg.WatchHistoryBytes = DefaultWatchHistoryBytes
	}
	if cfg.WatchBuffer <= 0 {
		cfg.WatchBuffer = 1024
	}
	c.cfg = cfg
	c.startRV = cfg.StartResourceVersion
	c.rv = cfg.StartResourceVersion
	c.resources = map[GroupResource]*resourceState{}
	c.watchers = map[*Watcher]struct{}{}
}

// ResourceVersion returns the version of the latest write the cache holds.
func (c *watchCache) ResourceVersion() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rv
}

// StartResourceVersion returns the oldest version the cache may serve: the counter's value when
// the store was made (Store), or the version its source stood at when it was last filled
// (Replace). Versions below it are never served.
func (c *watchCache) StartResourceVersion() uint64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.startRV
}

func (c *watchCache) stateLocked(gr GroupResource) *resourceState {
	st := c.resources[gr]
	if st == nil {
		st = &resourceState{byNS: map[string]map[string]*Object{}}
		st.history.init(c.cfg.WatchHistory, c.startRV)
		c.resources[gr] = st
	}
	return st
}

func (c *watchCache) getLocked(key Key) *Object {
	st := c.resources[key.GroupResource()]
	if st == nil {
		return nil
	}
	return st.byNS[key.Namespace][key.Name]
}

// Get returns the object at key, or an error wrapping ErrNotFound.
func (c *watchCache) Get(_ context.Context, key Key) (*Object, error) {
	c.mu.RLock()
	o := c.getLocked(key)
	c.mu.RUnlock()
	if o == nil {
		return nil, newErr(ErrNotFound, key, "")
	}
	return o, nil
}

// commitLocked applies one write of the cache's own counter: it takes the next
// resourceVersion (o must already carry it).
func (c *watchCache) commitLocked(t EventType, o, prev *Object) {
	c.rv++
	c.applyLocked(t, o, prev, c.rv)
}

// applyLocked updates the index with one write at version rv, appends it to the resource's
// history and hands the event to watchers.
func (c *watchCache) applyLocked(t EventType, o, prev *Object, rv uint64) {
	st := c.stateLocked(o.key.GroupResource())
	ns := st.byNS[o.key.Namespace]
	if t == Deleted {
		delete(ns, o.key.Name)
		if len(ns) == 0 {
			delete(st.byNS, o.key.Namespace)
		}
	} else {
		if ns == nil {
			ns = map[string]*Object{}
			st.byNS[o.key.Namespace] = ns
		}
		ns[o.key.Name] = o
	}
	ev := Event{Type: t, Object: o, ResourceVersion: rv, prev: prev}
	c.historyBytes += st.history.add(ev)
	c.trimHistoryLocked()
	c.dispatchLocked(ev)
}

// Close closes every watcher with ErrClosed and refuses further writes and watches. It is
// idempotent.
func (c *watchCache) Close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	for w := range c.watchers {
		c.closeWatcherLocked(w, ErrClosed, false)
	}
	c.wakeLocked()
}

func (c *watchCache) endWatchesLocked(gr GroupResource) {
	for w := range c.watchers {
		if len(w.opts.Resources) == 1 && w.opts.Resources[0] == gr {
			// Softly: the watcher still gets the events it accepted before its channel closes.
			c.closeWatcherLocked(w, ErrClosed, true)
		}
	}
}

// restamp returns a copy of cur as of version rv (for a DELETED event). It reads only cur and
// c.cfg, so it needs no lock.
func (c *watchCache) restamp(cur *Object, rv uint64) (*Object, error) {
	if o := withVersion(cur, formatRV(cur.rv), rv); o != nil {
		return o, nil
	}
	obj, err := cur.Decode()
	if err != nil {
		return nil, err
	}
	metadataOf(obj)["resourceVersion"] = formatRV(rv)
	return c.build(cur.key, obj)
}
