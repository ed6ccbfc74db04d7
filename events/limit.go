package events

import (
	"math"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"k8s.io/utils/clock"
)

// limit is the Event kind's kinds.Limit (EVENT_LIMIT, for the in-memory store): it counts every
// Event the write path stores, whoever writes it (the recorder, a client, the events.k8s.io
// view), in the order they were last seen, and gives the oldest back to expire when a new one
// needs room. It is safe for concurrent use.
type limit struct {
	max      int
	clock    clock.PassiveClock
	doneFunc func(*cache.Object) []cache.Key // done, made once: Reserve hands it to every create

	// mu guards what follows. It is never held across a write.
	mu sync.Mutex
	// order is a ring through head of the Events stored, the least recently seen first (equal
	// times in the order they were counted); one node per Event, nothing else to allocate.
	head  counted
	byKey map[cache.Key]*counted
	// reserved counts the creates between Reserve and done: room is kept for each.
	reserved int
}

// counted is one stored Event, when it was last seen (Unix nanoseconds), and its place in
// the order.
type counted struct {
	prev, next *counted
	key        cache.Key
	last       int64
}

func newLimit(max int, c clock.PassiveClock) *limit {
	if c == nil {
		c = clock.RealClock{}
	}
	l := &limit{max: max, clock: c, byKey: map[cache.Key]*counted{}}
	l.head.prev, l.head.next = &l.head, &l.head
	l.doneFunc = l.done
	return l
}

// Reserve makes room for one more Event: the oldest go until the Events counted and those
// being created fit in the limit, so the store never holds more than it.
func (l *limit) Reserve() ([]cache.Key, func(*cache.Object) []cache.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	expire := l.evictLocked(l.max-l.reserved-1, nil)
	l.reserved++
	return expire, l.doneFunc
}

// done counts the Event a create stored (none when it failed) and releases its room. The new
// Event is never the one to go at once, even when it claims to be the oldest: it goes first
// at the next create.
func (l *limit) done(stored *cache.Object) []cache.Key {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reserved--
	if stored == nil {
		return nil
	}
	c := l.putLocked(stored.Key(), l.lastSeen(stored))
	// More creates ran at once than the limit holds: they could not all make room first.
	return l.evictLocked(l.max-l.reserved, c)
}

// Updated moves an Event written again to its place in the order.
func (l *limit) Updated(obj *cache.Object) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.byKey[obj.Key()]; ok {
		l.putLocked(obj.Key(), l.lastSeen(obj))
	}
}

// Removed forgets the Event at key.
func (l *limit) Removed(key cache.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c, ok := l.byKey[key]; ok {
		l.unlinkLocked(c)
	}
}

// putLocked counts the Event at key as last seen at last, in its place in the order (after
// every Event seen at the same time or before).
func (l *limit) putLocked(key cache.Key, last int64) *counted {
	c := l.byKey[key]
	if c == nil {
		c = &counted{key: key}
		l.byKey[key] = c
	} else {
		c.prev.next, c.next.prev = c.next, c.prev
	}
	c.last = last
	at := l.head.prev
	for at != &l.head && at.last > last {
		at = at.prev
	}
	c.prev, c.next = at, at.next
	at.next.prev, at.next = c, c
	return c
}

func (l *limit) unlinkLocked(c *counted) {
	c.prev.next, c.next.prev = c.next, c.prev
	c.prev, c.next = nil, nil
	delete(l.byKey, c.key)
}

// evictLocked forgets the oldest Events but spare until at most keep are counted, and returns
// their keys for the write path to expire.
func (l *limit) evictLocked(keep int, spare *counted) []cache.Key {
	var out []cache.Key
	for c := l.head.next; c != &l.head && len(l.byKey) > max(keep, 0); {
		next := c.next
		if c != spare {
			l.unlinkLocked(c)
			out = append(out, c.key)
		}
		c = next
	}
	return out
}

// lastSeen is when the stored Event o was last seen (see lastSeen), or now when it does not
// say; a time beyond what Unix nanoseconds hold (years 1678-2262) counts as their end.
func (l *limit) lastSeen(o *cache.Object) int64 {
	t, err := time.Parse(time.RFC3339, lastSeen(o))
	switch {
	case err != nil:
		return l.clock.Now().UnixNano()
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}
