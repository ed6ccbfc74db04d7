package events

import (
	"container/list"
	"context"
	"sort"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
)

// Resync is for a store whose content was replaced (a snapshot restored): the recorder forgets
// the Events it aggregates into (recording after it makes new Events, never bumps one from
// before), and when kind (the Event kind served) carries the limit of Kind, the limit counts
// the Events the store holds now, oldest last seen first, and those beyond it are expired.
func (r *Recorder) Resync(ctx context.Context, kind *kinds.Kind) error {
	r.mu.Lock()
	// An entry still writing removes itself from the old order; list.Remove ignores an element
	// of another list.
	r.index, r.order = map[aggKey]*entry{}, list.New()
	r.mu.Unlock()
	if kind == nil {
		return nil
	}
	l, ok := kind.Limit.(*limit)
	if !ok {
		return nil
	}
	res, err := r.cfg.Client.List(ctx, Resource)
	if err != nil {
		return err
	}
	for _, key := range l.reset(res.Items) {
		if err := r.cfg.Client.Expire(ctx, key); err != nil {
			return err
		}
	}
	return nil
}

// reset counts stored, and only them, in the order they were last seen, and returns the
// oldest beyond the limit (forgotten already) for the caller to expire.
func (l *limit) reset(stored []*cache.Object) []cache.Key {
	last := make([]int64, len(stored))
	order := make([]int, len(stored))
	for i, o := range stored {
		last[i], order[i] = l.lastSeen(o), i
	}
	sort.SliceStable(order, func(a, b int) bool { return last[order[a]] < last[order[b]] })
	l.mu.Lock()
	defer l.mu.Unlock()
	l.head.prev, l.head.next = &l.head, &l.head
	l.byKey = make(map[cache.Key]*counted, len(stored))
	for _, i := range order {
		l.putLocked(stored[i].Key(), last[i]) // in order: each goes last, at once
	}
	return l.evictLocked(l.max-l.reserved, nil)
}
