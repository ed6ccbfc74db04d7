package cache

import (
	"context"
	"slices"
	"sort"
	"strings"
	"sync"

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
	// arrives as ADDED, one that stops matching as DELETED carrying its last state that
	// matched, at the change's version (as kube-apiserver's watch cache sends it). Selectors
	// are never evaluated under the store's lock: a costly selector slows its own watcher only.
	Label labels.Selector
	Field fields.Selector
	// ResourceVersion starts the watch after this version: every matching change after it is
	// replayed from history first. When several changes the watcher sees share this version
	// (one transaction at the source), they are replayed first too, so a watcher cut off
	// between two of them loses none (those it had come again); a version with one change
	// the watcher sees is not repeated, and one whose changes were partly evicted from history
	// fails with ErrGone (see replayShared). Zero means from now. A version older than the history or
	// never issued by this store fails with ErrGone; one it has not reached yet, see
	// WaitForVersion.
	ResourceVersion uint64
	// WaitForVersion makes a ResourceVersion the store has not reached yet one to wait for
	// rather than one never issued: the watch starts from now and sends only the changes after
	// it (kube-apiserver's watch cache does so; opemu's own stream refuses it, so that a
	// browser holding a version of an etcd since wiped starts again).
	WaitForVersion bool
	// SendInitialEvents sends the current matching objects as ADDED events first (carrying the
	// snapshot's version), then a Bookmark, then changes; ResourceVersion is then only checked
	// for being issued.
	SendInitialEvents bool
}

// chanSlack is how many live events a watcher's channel holds beyond its initial events. The
// rest of its buffer (Config.WatchBuffer) is a queue allocated only while events wait in it,
// so an idle watcher costs a few hundred bytes rather than its whole buffer.
const chanSlack = 16

// Watcher receives the events of one watch. See Store.Watch and the package doc.
type Watcher struct {
	c         *watchCache
	opts      WatchOptions
	selective bool // opts has a label or field selector: events pass through the pump
	// from, when set, is a version the store had not reached when the watch started: events
	// at or before it are not sent, and no bookmark is offered before the store reaches it.
	from uint64
	ch   chan Event
	// stopped is closed on a hard stop; a pump blocked on a send gives up.
	stopped chan struct{}
	pumps   sync.WaitGroup

	// mu guards the fields below. Lock order: the watch cache's mu, then mu. The pump takes mu
	// alone.
	mu sync.Mutex
	// queue holds accepted events not yet in ch, oldest first: raw store events, which the
	// pump converts (selectors, transitions) and sends. Allocated only while non-empty.
	queue []Event
	// limit is how many events may be pending (len(ch) + len(queue)) before the watcher is
	// closed with ErrTooSlow: Config.WatchBuffer plus its initial events.
	limit   int
	holding bool // Watch is still putting the initial events into ch; live events queue
	pumping bool // a pump goroutine runs
	done    bool // closed: no more events are accepted
	drain   bool // closed softly: the queue is still delivered before ch closes
	err     error
	// stopAfter unregisters the context.AfterFunc that stops the watcher.
	stopAfter func() bool
}

// Watch streams changes to objects matching opts that happen after opts.ResourceVersion.
// Registration and the read of history happen under one lock, so nothing is missed or sent
// twice; selectors are applied and the initial events sorted outside it, before Watch returns
// (so the initial events are in the channel when it does). The channel is closed exactly once,
// by the store, when ctx is done, Stop is called, the store closes, or more than
// Config.WatchBuffer events (beyond the initial ones) wait undelivered; Err then says which.
// Writers never block on a watcher. The consumer must call Stop.
func (c *watchCache) Watch(ctx context.Context, opts WatchOptions) (*Watcher, error) {
	w := &Watcher{c: c, opts: opts, stopped: make(chan struct{})}
	w.selective = opts.Label != nil && !opts.Label.Empty() || opts.Field != nil && !opts.Field.Empty()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil, newErr(ErrClosed, Key{}, "")
	}
	if opts.ResourceVersion > c.rv && opts.WaitForVersion && !opts.SendInitialEvents {
		w.from = opts.ResourceVersion
	} else if opts.ResourceVersion != 0 {
		err := c.checkRVLocked(opts.ResourceVersion, opts.Resources)
		if err == nil && !opts.SendInitialEvents {
			err = c.checkWholeLocked(opts.ResourceVersion, opts.Resources)
		}
		if err != nil {
			c.mu.Unlock()
			return nil, err
		}
	}
	var candidates []Event
	snapshot := opts.SendInitialEvents
	switch {
	case snapshot:
		candidates = c.snapshotLocked(w)
		candidates = append(candidates, Event{Type: Bookmark, ResourceVersion: c.rv})
	case opts.ResourceVersion != 0 && w.from == 0:
		candidates = c.replayLocked(w, opts.ResourceVersion)
	}
	w.holding = true
	c.watchers[w] = struct{}{}
	c.mu.Unlock()

	// Outside the store's lock: apply selectors and order the initial events. Live events
	// meanwhile wait in the queue, behind them.
	initial := candidates[:0]
	for _, ev := range candidates {
		if snapshot {
			if ev.Type == Bookmark || w.matches(ev.Object) {
				initial = append(initial, ev)
			}
		} else if out, ok := w.convert(ev); ok {
			initial = append(initial, out)
		}
	}
	if !snapshot && opts.ResourceVersion != 0 {
		initial = replayShared(initial, opts.ResourceVersion)
	}
	if snapshot {
		sortByKey(initial[:len(initial)-1]) // the Bookmark stays last
	} else {
		// Stable: the changes of one version stay in the order they were made.
		sort.SliceStable(initial, func(i, j int) bool { return initial[i].ResourceVersion < initial[j].ResourceVersion })
	}
	w.mu.Lock()
	w.ch = make(chan Event, len(initial)+chanSlack)
	w.limit = c.cfg.WatchBuffer + len(initial)
	for _, ev := range initial {
		w.ch <- ev
	}
	w.holding = false
	switch {
	case w.done && !w.drain:
		// Stopped while holding (Store.Close): no pump ran, so ch is closed here.
		w.queue = nil
		close(w.ch)
	case len(w.queue) > 0:
		w.kickLocked() // the pump closes ch after the queue if the watcher was closed softly
	case w.done:
		close(w.ch)
	}
	closed := w.done
	w.mu.Unlock()
	if closed {
		return w, nil
	}

	stop := context.AfterFunc(ctx, func() { w.stop(ctx.Err()) })
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		stop()
	} else {
		w.stopAfter = stop
		w.mu.Unlock()
	}
	return w, nil
}

// Events returns the channel of events. It is closed exactly once, by the store.
func (w *Watcher) Events() <-chan Event { return w.ch }

// Stop ends the watch and closes the channel; events not yet taken are dropped. It is
// idempotent and returns once the watcher's pump goroutine, if any, has exited. The consumer
// calls it.
func (w *Watcher) Stop() { w.stop(nil) }

func (w *Watcher) stop(err error) {
	w.c.mu.Lock()
	w.c.closeWatcherLocked(w, err, false)
	w.c.mu.Unlock()
	w.pumps.Wait()
}

// Err says why the channel closed: nil (Stop), the context's error, ErrTooSlow or ErrClosed.
// It is meaningful once the channel is closed.
func (w *Watcher) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Progress returns a version the consumer may safely resume from (a bookmark) when every event
// up to the store's current version has been taken from the channel; ok is false while events
// are still queued.
func (w *Watcher) Progress() (rv uint64, ok bool) {
	w.c.mu.RLock()
	defer w.c.mu.RUnlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	// Every event up to s.rv was handed to this watcher under s.mu (or is in its initial
	// events), and the pump removes an event from the queue only after sending it.
	if w.done || w.holding || len(w.queue) > 0 || len(w.ch) > 0 || w.c.rv < w.from {
		return 0, false
	}
	return w.c.rv, true
}

// closeWatcherLocked closes w for err and removes it from the store. A soft close (drain)
// still delivers what w has accepted; a hard one drops it. Called with s.mu held.
func (c *watchCache) closeWatcherLocked(w *Watcher, err error, drain bool) {
	delete(c.watchers, w)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		if w.drain && !drain {
			// A hard stop after a soft close: stop delivering (a running pump closes ch).
			w.drain = false
			close(w.stopped)
		}
		return
	}
	w.done, w.err, w.drain = true, err, drain
	if w.stopAfter != nil {
		w.stopAfter()
	}
	if !drain {
		close(w.stopped)
	}
	switch {
	case w.holding:
		// Watch closes ch once it has made it.
	case w.pumping:
		// The pump closes ch when it exits.
	default:
		w.queue = nil
		close(w.ch)
	}
}

// dispatchLocked hands ev to every watcher that wants it, under s.mu. It costs each watcher a
// scope check and an append or a non-blocking send; selectors are left to the watcher's pump.
// A watcher with too many events pending is closed with ErrTooSlow rather than blocking the
// writer.
func (c *watchCache) dispatchLocked(ev Event) {
	for w := range c.watchers {
		if !w.inScope(ev.Object) || ev.ResourceVersion <= w.from {
			continue
		}
		if !w.offer(ev) {
			c.closeWatcherLocked(w, ErrTooSlow, false)
		}
	}
}

// offer accepts ev for w; false when w has more events pending than its limit. An event for
// a watcher without selectors goes straight into ch when nothing waits before it and there is
// room; otherwise it joins the queue and the pump is started.
func (w *Watcher) offer(ev Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return true
	}
	if !w.holding && len(w.queue)+len(w.ch) >= w.limit {
		return false
	}
	if !w.selective && !w.holding && !w.pumping && len(w.queue) == 0 {
		// Without selectors convert is a scope-free identity: no selector runs under s.mu.
		out, _ := w.convert(ev)
		select {
		case w.ch <- out:
			return true
		default:
		}
	}
	w.queue = append(w.queue, ev)
	w.kickLocked()
	return true
}

// kickLocked starts the pump when events wait and none runs. Called with w.mu held.
func (w *Watcher) kickLocked() {
	if w.pumping || w.holding || len(w.queue) == 0 || w.done && !w.drain {
		return
	}
	w.pumping = true
	w.pumps.Add(1)
	go w.pump()
}

// pump moves queued events into ch, in order, applying selectors, until the queue is empty
// (then it exits; the next queued event starts another) or the watcher is stopped. It is the
// only sender on ch while it runs, and it closes ch when the watcher was closed meanwhile.
func (w *Watcher) pump() {
	defer w.pumps.Done()
	for {
		w.mu.Lock()
		if w.done && !w.drain || len(w.queue) == 0 {
			w.pumping = false
			if w.done {
				w.queue = nil
				close(w.ch)
			}
			w.mu.Unlock()
			return
		}
		ev := w.queue[0]
		w.mu.Unlock()
		if out, ok := w.convert(ev); ok {
			select {
			case w.ch <- out:
			case <-w.stopped:
				continue // done is set: the next round closes ch
			}
		}
		w.mu.Lock()
		w.queue[0] = Event{}
		w.queue = w.queue[1:]
		if len(w.queue) == 0 {
			w.queue = nil
		}
		w.mu.Unlock()
	}
}

func (w *Watcher) inScope(o *Object) bool {
	if len(w.opts.Resources) > 0 && !slices.Contains(w.opts.Resources, o.key.GroupResource()) {
		return false
	}
	return w.opts.Namespace == "" || w.opts.Namespace == o.key.Namespace
}

func (w *Watcher) matches(o *Object) bool { return matches(o, w.opts.Label, w.opts.Field) }

// convert turns an in-scope store event into what this watcher sees, applying selector
// transitions. It reads only w.opts and the immutable event, so it needs no lock.
func (w *Watcher) convert(ev Event) (Event, bool) {
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
		// The last state that matched, at the version of the change that made it leave.
		ev.Type = Deleted
		if last, err := w.c.restamp(ev.prev, ev.ResourceVersion); err == nil {
			ev.Object = last
		}
		return ev, true
	}
	return Event{}, false
}

// snapshotLocked returns the current objects in w's scope as ADDED events, unordered and not
// yet filtered by selectors.
func (c *watchCache) snapshotLocked(w *Watcher) []Event {
	var out []Event
	for gr, st := range c.resources {
		if len(w.opts.Resources) > 0 && !slices.Contains(w.opts.Resources, gr) {
			continue
		}
		for ns, m := range st.byNS {
			if w.opts.Namespace != "" && ns != w.opts.Namespace {
				continue
			}
			for _, o := range m {
				out = append(out, Event{Type: Added, Object: o, ResourceVersion: c.rv})
			}
		}
	}
	return out
}

// sortByKey orders events by their object's key: resource, then as List orders (CompareKeys).
func sortByKey(evs []Event) {
	slices.SortFunc(evs, func(x, y Event) int {
		a, b := x.Object.key, y.Object.key
		if a.Group != b.Group || a.Resource != b.Resource {
			return strings.Compare(a.GroupResource().String(), b.GroupResource().String())
		}
		return CompareKeys(a.Namespace, a.Name, b.Namespace, b.Name)
	})
}

// replayLocked returns the events in w's scope at or after rv (those at rv for replayShared
// to keep or drop), unordered and not yet converted.
func (c *watchCache) replayLocked(w *Watcher, rv uint64) []Event {
	var out []Event
	for gr, st := range c.resources {
		if len(w.opts.Resources) > 0 && !slices.Contains(w.opts.Resources, gr) {
			continue
		}
		st.history.after(rv-1, func(ev Event) {
			if w.inScope(ev.Object) {
				out = append(out, ev)
			}
		})
	}
	return out
}

// A version several changes share (one etcd transaction: a group commit of Events, a lease's
// expiry) is replayed whole to a watch resuming at it: the watcher may have been cut off
// between two of them (its connection, ErrTooSlow), and its last version cannot say where.
// Changes of it the watcher had already received come again (duplicates, never a loss; see
// docs/DESIGN.md, "A version several changes share"). A version with one change the watcher
// sees is complete once seen, so the memory store, one version per write, never replays.

// replayShared keeps the events of initial (converted for the watcher) at rv when there are
// several of them, and drops them otherwise.
func replayShared(initial []Event, rv uint64) []Event {
	n := 0
	for _, ev := range initial {
		if ev.ResourceVersion == rv {
			n++
		}
	}
	if n != 1 {
		return initial
	}
	return slices.DeleteFunc(initial, func(ev Event) bool { return ev.ResourceVersion == rv })
}

// checkWholeLocked returns an error wrapping ErrGone when a watch resuming at rv over grs
// (every resource when empty) cannot be replayed that version whole: some of the changes that
// share it were evicted from history.
func (c *watchCache) checkWholeLocked(rv uint64, grs []GroupResource) error {
	torn := func(st *resourceState) bool {
		return st != nil && st.history.sinceShared && st.history.since == rv
	}
	for gr, st := range c.resources {
		if (len(grs) == 0 || slices.Contains(grs, gr)) && torn(st) {
			return goneError(rv, rv+1)
		}
	}
	return nil
}
