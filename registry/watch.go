package registry

import (
	"context"
	"errors"

	"github.com/opemu/opemu/cache"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// Watches start here, as kube-apiserver's registry store starts them: what a resourceVersion
// means, the consistent read before initial events, a view's selectors and objects, and the
// 410 of a version that cannot be served. Framing, timing (bookmarks, heartbeats, timeouts)
// and shutdown are the transport's (package server); fan-out and ordering are the store's.

// WatchOptions is a Kubernetes watch request (SPEC §4.2) of one kind.
type WatchOptions struct {
	// Label and Field select objects; nil means everything. Field names are the watched kind's
	// (a view's are renamed into the stored kind's here).
	Label labels.Selector
	Field fields.Selector
	// ResourceVersion is Kubernetes' watch semantics: "" starts with synthetic ADDED events of
	// the current objects, read consistently (as a list without resourceVersion); "0" the
	// same from what this server holds; N every change after N (once the store reaches N), or a
	// 410 when N is no longer served. It must parse (cache.ParseResourceVersion).
	ResourceVersion string
	// SendInitialEvents, when set, overrides ResourceVersion's choice of initial events: true
	// sends them (then the k8s.io/initial-events-end bookmark, with AllowWatchBookmarks),
	// false starts after ResourceVersion ("" and "0": from now).
	SendInitialEvents *bool
	// AllowWatchBookmarks lets the bookmark ending the initial events through. Periodic
	// bookmarks are the transport's (Watcher.Progress).
	AllowWatchBookmarks bool
}

// Watch watches t's kind in t.Key.Namespace (every namespace when empty). A version that
// cannot be served is not an error here: the Watcher starts closed and Err says why (a 410),
// as a client expects it in the stream. Errors are those of the request (a consistent read
// that timed out, a closed store). The caller must call Stop.
func (s *Store) Watch(ctx context.Context, t Target, o WatchOptions) (*Watcher, error) {
	field, err := storageFields(t, o.Field)
	if err != nil {
		return nil, err
	}
	opts := cache.WatchOptions{
		Resources: []cache.GroupResource{t.Key.GroupResource()},
		Namespace: t.Key.Namespace,
		Label:     o.Label,
		Field:     field,
		// A version not reached yet is waited for, as kube-apiserver's watch cache does.
		WaitForVersion: true,
	}
	rv, _ := cache.ParseResourceVersion(o.ResourceVersion)
	switch {
	case o.SendInitialEvents != nil:
		opts.SendInitialEvents = *o.SendInitialEvents
		if !opts.SendInitialEvents {
			opts.ResourceVersion = rv
		}
	case rv == 0:
		opts.SendInitialEvents = true
	default:
		opts.ResourceVersion = rv
	}
	// "Get state and start at most recent": the state is a consistent read, as a list's.
	w, err := s.watch(ctx, opts, opts.SendInitialEvents && o.ResourceVersion == "")
	if err != nil {
		return nil, err
	}
	if t.Kind.ConvertsReads() {
		w.view = &t
	}
	w.initialEnd = o.SendInitialEvents != nil && *o.SendInitialEvents && o.AllowWatchBookmarks
	return w, nil
}

// ResourcesOptions choose what WatchResources streams: opemu's own stream of stored objects
// across resources (SPEC §5.1), in storage terms.
type ResourcesOptions struct {
	// Resources to watch; empty means every resource.
	Resources []cache.GroupResource
	// Namespace restricts to one namespace; "" means all.
	Namespace string
	// Label selects objects; nil means everything.
	Label labels.Selector
	// Initial sends the current objects first, as ADDED events carrying the snapshot's
	// version; read consistently when After is zero.
	Initial bool
	// After resumes after this version (every change since, or a 410 when it cannot be
	// served); zero means from now.
	After uint64
}

// WatchResources watches the stored objects of o.Resources as they are stored (no view), as
// Watch does otherwise. The caller must call Stop.
func (s *Store) WatchResources(ctx context.Context, o ResourcesOptions) (*Watcher, error) {
	return s.watch(ctx, cache.WatchOptions{
		Resources:         o.Resources,
		Namespace:         o.Namespace,
		Label:             o.Label,
		SendInitialEvents: o.Initial,
		ResourceVersion:   o.After,
	}, o.Initial && o.After == 0)
}

// watch opens the store's watch, after a consistent read when consistent is set. A version the
// store cannot serve makes a Watcher that starts closed.
func (s *Store) watch(ctx context.Context, opts cache.WatchOptions, consistent bool) (*Watcher, error) {
	if consistent {
		if err := s.cfg.Storage.WaitUntilFresh(ctx, 0); err != nil {
			return nil, err
		}
	}
	cw, err := s.cfg.Storage.Watch(ctx, opts)
	switch {
	case errors.Is(err, cache.ErrGone):
		return &Watcher{err: err}, nil
	case err != nil:
		return nil, err
	}
	return &Watcher{w: cw}, nil
}

// storageFields renames a view's field selector into the stored kind's labels, which the
// store indexes; other kinds' selectors are returned as they are.
func storageFields(t Target, sel fields.Selector) (fields.Selector, error) {
	conv := t.Kind.Conversion
	if conv == nil || sel == nil {
		return sel, nil
	}
	out, err := sel.Transform(func(label, value string) (string, string, error) {
		if l, ok := conv.FieldLabels[label]; ok {
			return l, value, nil
		}
		return label, value, nil
	})
	if err != nil {
		return nil, badRequest("invalid field selector: %v", err)
	}
	return out, nil
}

// Watcher is one open watch: the store's events, given to its client as Event says. It is
// used from one goroutine, the stream's.
type Watcher struct {
	w *cache.Watcher // nil when the watch could not start at its version (err)
	// err is why the watch could not start (a 410).
	err error
	// view, when set, is the view kind (kinds.Conversion) each object is converted into.
	view *Target
	// initialEnd lets the bookmark ending the initial events through.
	initialEnd bool
}

// closedEvents is the event channel of a watch that could not start.
var closedEvents = func() chan cache.Event {
	ch := make(chan cache.Event)
	close(ch)
	return ch
}()

// Events is the store's event channel, closed when the watch ends (see cache.Watcher); pass
// each event through Event. It is closed from the start when the watch could not start.
func (w *Watcher) Events() <-chan cache.Event {
	if w.w == nil {
		return closedEvents
	}
	return w.w.Events()
}

// Event returns ev as the watch's client gets it; ok is false when the client did not ask for
// it (the bookmark ending the initial events, without AllowWatchBookmarks).
func (w *Watcher) Event(ev cache.Event) (_ Event, ok bool) {
	if ev.Type == cache.Bookmark && !w.initialEnd {
		return Event{}, false
	}
	return Event{Type: ev.Type, Object: ev.Object, ResourceVersion: ev.ResourceVersion, view: w.view}, true
}

// Err says, once Events is closed, what the client must be told: a 410 when the watch could not
// start at its version, when it fell behind (its client must list again) or when its store's
// cache was refilled; nil when it ended for any other reason (its context, Stop, shutdown).
func (w *Watcher) Err() error {
	if w.w == nil {
		return w.err
	}
	switch err := w.w.Err(); {
	case errors.Is(err, cache.ErrTooSlow):
		return apierrors.NewResourceExpired("watch fell behind; relist")
	case errors.Is(err, cache.ErrGone):
		return err
	}
	return nil
}

// Progress returns a version the client may resume from (a bookmark's) when every event up to
// the store's current version has been taken from Events; ok is false otherwise.
func (w *Watcher) Progress() (rv uint64, ok bool) {
	if w.w == nil {
		return 0, false
	}
	return w.w.Progress()
}

// Stop ends the watch. It is idempotent.
func (w *Watcher) Stop() {
	if w.w != nil {
		w.w.Stop()
	}
}

// Event is one change as a watch's client gets it.
type Event struct {
	// Type is ADDED, MODIFIED, DELETED, or BOOKMARK for the end of the initial events.
	Type cache.EventType
	// Object is the stored object; nil for a bookmark.
	Object *cache.Object
	// ResourceVersion is the change's version (the snapshot's for initial events).
	ResourceVersion uint64
	view            *Target
}

// JSON returns the event's object as the watched kind shows it: its stored bytes (shared:
// never modify them), or for a view the object converted.
func (e Event) JSON() ([]byte, error) {
	if e.view == nil {
		return e.Object.Raw(), nil
	}
	return View(*e.view, e.Object)
}
