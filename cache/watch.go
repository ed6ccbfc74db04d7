package cache

import (
	"context"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// EventType says what happened to an object. The values are Kubernetes' watch event types.
type EventType string

const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
	// Bookmark marks the end of the initial events of a watch with SendInitialEvents; its
	// Object is nil and its ResourceVersion is the snapshot's.
	Bookmark EventType = "BOOKMARK"
)

// Event is one change seen by a watcher. Object is immutable and shared by every watcher.
type Event struct {
	Type   EventType
	Object *Object
	// ResourceVersion is the write's version: the object's own, except for the initial events
	// of a watch with SendInitialEvents, which carry the snapshot's version.
	ResourceVersion uint64
	prev            *Object // the state before a MODIFIED or DELETED write
}

// WatchOptions choose what a watcher sees.
type WatchOptions struct {
	// Resources to watch; empty means every resource.
	Resources []GroupResource
	// Namespace restricts to one namespace; "" means all.
	Namespace string
	// Label and Field select objects; nil means everything. An object that starts matching
	// arrives as ADDED, one that stops matching as DELETED (carrying its new state).
	Label labels.Selector
	Field fields.Selector
	// ResourceVersion starts the watch after this version: every matching change after it is
	// replayed from history first. Zero means from now. A version older than the history or
	// never issued by this store fails with ErrGone.
	ResourceVersion uint64
	// SendInitialEvents sends the current matching objects as ADDED events first (carrying the
	// snapshot's version), then a Bookmark, then changes; ResourceVersion is then only checked
	// for being issued.
	SendInitialEvents bool
}

// Watcher receives the events of one watch. See Store.Watch.
type Watcher struct {
	s    *Store
	opts WatchOptions
	ch   chan Event
	// Guarded by s.mu.
	done      bool
	err       error
	stopAfter func() bool
}

// Watch streams changes to objects matching opts that happen after opts.ResourceVersion.
// Registration and the history replay happen under one lock, so nothing is missed or sent
// twice. The channel is closed exactly once, by the store, when ctx is done, Stop is called,
// the store closes, or the watcher falls more than Config.WatchBuffer events behind; Err then
// says which. Writers never block on a watcher.
func (s *Store) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	w := &Watcher{s: s, opts: opts}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, newErr(ErrClosed, Key{}, "")
	}
	var initial []Event
	if opts.ResourceVersion != 0 {
		if err := s.checkRVLocked(opts.ResourceVersion, opts.Resources); err != nil {
			s.mu.Unlock()
			return nil, err
		}
	}
	switch {
	case opts.SendInitialEvents:
		initial = s.snapshotLocked(w)
		initial = append(initial, Event{Type: Bookmark, ResourceVersion: s.rv})
	case opts.ResourceVersion != 0:
		initial = s.replayLocked(w, opts.ResourceVersion)
	}
	w.ch = make(chan Event, s.cfg.WatchBuffer+len(initial))
	for _, ev := range initial {
		w.ch <- ev
	}
	s.watchers[w] = struct{}{}
	s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { w.stop(ctx.Err()) })
	s.mu.Lock()
	if w.done {
		stop()
	} else {
		w.stopAfter = stop
	}
	s.mu.Unlock()
	return w, nil
}

// Events returns the channel of events. It is closed exactly once, by the store.
func (w *Watcher) Events() <-chan Event { return w.ch }

// Stop ends the watch and closes the channel. It is idempotent; the consumer calls it.
func (w *Watcher) Stop() { w.stop(nil) }

func (w *Watcher) stop(err error) {
	w.s.mu.Lock()
	w.s.closeWatcherLocked(w, err)
	w.s.mu.Unlock()
}

// Err says why the channel closed: nil (Stop), the context's error, ErrTooSlow or ErrClosed.
// It is meaningful once the channel is closed.
func (w *Watcher) Err() error {
	w.s.mu.RLock()
	defer w.s.mu.RUnlock()
	return w.err
}

// Progress returns a version the consumer may safely resume from (a bookmark) when every event
// up to the store's current version has been taken from the channel; ok is false while events
// are still queued.
func (w *Watcher) Progress() (rv uint64, ok bool) {
	w.s.mu.RLock()
	defer w.s.mu.RUnlock()
	if w.done || len(w.ch) > 0 {
		return 0, false
	}
	return w.s.rv, true
}

func (s *Store) closeWatcherLocked(w *Watcher, err error) {
	if w.done {
		return
	}
	w.done, w.err = true, err
	close(w.ch)
	delete(s.watchers, w)
	if w.stopAfter != nil {
		w.stopAfter()
	}
}

// dispatchLocked hands ev to every watcher that wants it; a watcher whose buffer is full is
// closed with ErrTooSlow rather than blocking the writer.
func (s *Store) dispatchLocked(ev Event) {
	for w := range s.watchers {
		out, ok := w.convert(ev)
		if !ok {
			continue
		}
		select {
		case w.ch <- out:
		default:
			s.closeWatcherLocked(w, ErrTooSlow)
		}
	}
}

func (w *Watcher) inScope(o *Object) bool {
	if len(w.opts.Resources) > 0 && !slices.Contains(w.opts.Resources, o.key.GroupResource()) {
		return false
	}
	return w.opts.Namespace == "" || w.opts.Namespace == o.key.Namespace
}

func (w *Watcher) matches(o *Object) bool { return matches(o, w.opts.Label, w.opts.Field) }

// convert turns a store event into what this watcher sees, applying selector transitions.
func (w *Watcher) convert(ev Event) (Event, bool) {
	if !w.inScope(ev.Object) {
		return Event{}, false
	}
	now := w.matches(ev.Object)
	switch ev.Type {
	case Added:
		return ev, now
	case Deleted:
		return ev, now || ev.prev != nil && w.matches(ev.prev)
	}
	before := ev.prev != nil && w.matches(ev.prev)
	switch {
	case now && before:
		return ev, true
	case now:
		ev.Type = Added
		return ev, true
	case before:
		ev.Type = Deleted
		return ev, true
	}
	return Event{}, false
}

// snapshotLocked returns the current matching objects as ADDED events in key order.
func (s *Store) snapshotLocked(w *Watcher) []Event {
	var out []Event
	for gr, st := range s.resources {
		if len(w.opts.Resources) > 0 && !slices.Contains(w.opts.Resources, gr) {
			continue
		}
		for ns, m := range st.byNS {
			if w.opts.Namespace != "" && ns != w.opts.Namespace {
				continue
			}
			for _, o := range m {
				if w.matches(o) {
					out = append(out, Event{Type: Added, Object: o, ResourceVersion: s.rv})
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Object.key, out[j].Object.key
		if a.Group != b.Group || a.Resource != b.Resource {
			return a.GroupResource().String() < b.GroupResource().String()
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	return out
}

// replayLocked returns, in version order, the events after rv this watcher would have seen.
func (s *Store) replayLocked(w *Watcher, rv uint64) []Event {
	var out []Event
	for gr, st := range s.resources {
		if len(w.opts.Resources) > 0 && !slices.Contains(w.opts.Resources, gr) {
			continue
		}
		st.history.after(rv, func(ev Event) {
			if e, ok := w.convert(ev); ok {
				out = append(out, e)
			}
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ResourceVersion < out[j].ResourceVersion })
	return out
}
