package cache

import (
	"context"
	"errors"
)

// Watchable is what Mirror watches: a store, or a client writing through one.
type Watchable interface {
	Watch(ctx context.Context, opts WatchOptions) (*Watcher, error)
}

// Mirror keeps a copy of what opts select and hands the whole set to publish: once the
// initial list is in (opts.SendInitialEvents is set for it), then after each burst of changes
// (when no further event is queued). A watch that ends early (it fell behind, or its history
// was compacted) is opened again from a fresh list, after relisting is told why. Mirror blocks
// until ctx is done or s is closed, and then returns nil; it returns the error of a Watch that
// failed otherwise. publish owns the map only until it returns (Mirror keeps changing it).
func Mirror(ctx context.Context, s Watchable, opts WatchOptions, publish func(map[Key]*Object), relisting func(reason error)) error {
	opts.SendInitialEvents = true
	for ctx.Err() == nil {
		w, err := s.Watch(ctx, opts)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		known := map[Key]*Object{}
		initial := true
		for ev := range w.Events() {
			switch ev.Type {
			case Bookmark:
				initial = false
			case Deleted:
				delete(known, ev.Object.Key())
			default:
				known[ev.Object.Key()] = ev.Object
			}
			if !initial && len(w.Events()) == 0 {
				publish(known)
			}
		}
		if ctx.Err() != nil || errors.Is(w.Err(), ErrClosed) {
			return nil
		}
		if relisting != nil {
			relisting(w.Err())
		}
	}
	return nil
}
