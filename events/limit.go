package events

import (
	"container/list"
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
	max   int
	clock clock.PassiveClock

	// mu guards what follows. It is never held across a write.
	mu sync.Mutex
	// order holds the Events stored, the least recently seen first (equal times in the order
	// they were counted).
	order *list.List // of counted
	byKey map[cache.Key]*list.Element
	// reserved counts the creates between Reserve and done: room is kept for each.
	reserved int
}

// counted is one stored Event and when it was last seen.
type counted struct {
	key  cache.Key
	last time.Time
}

func newLimit(max int, c clock.PassiveClock) *limit {
	if c == nil {
		c = clock.RealClock{}
	}
	return &limit{max: max, clock: c, order: list.New(), byKey: map[cache.Key]*list.Element{}}
}

// Reserve makes room for one more Event: the oldest go until the Events counted and those
// being created fit in the limit, so the store never holds more than it.
func (l *limit) Reserve() ([]cache.Key, func(*cache.Object) []cache.Key) {
	l.mu.Lock()
	defer l.mu.Unlock()
	expire := l.evictLocked(l.max-l.reserved-1, nil)
	l.reserved++
	return expire, l.done
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
	el := l.putLocked(stored.Key(), l.lastSeen(stored))
	// More creates ran at once than the limit holds: they could not all make room first.
	return l.evictLocked(l.max-l.reserved, el)
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
	if el, ok := l.byKey[key]; ok {
		l.order.Remove(el)
		delete(l.byKey, key)
	}
}

// putLocked counts the Event at key as last seen at last, in its place in the order (after
// every Event seen at the same time or before).
func (l *limit) putLocked(key cache.Key, last time.Time) *list.Element {
	if el, ok := l.byKey[key]; ok {
		l.order.Remove(el)
	}
	at := l.order.Back()
	for at != nil && at.Value.(counted).last.After(last) {
		at = at.Prev()
	}
	var el *list.Element
	if at == nil {
		el = l.order.PushFront(counted{key, last})
	} else {
		el = l.order.InsertAfter(counted{key, last}, at)
	}
	l.byKey[key] = el
	return el
}

// evictLocked forgets the oldest Events but spare until at most keep are counted, and returns
// their keys for the write path to expire.
func (l *limit) evictLocked(keep int, spare *list.Element) []cache.Key {
	var out []cache.Key
	for el := l.order.Front(); el != nil && l.order.Len() > max(keep, 0); {
		next := el.Next()
		if el != spare {
			c := el.Value.(counted)
			l.order.Remove(el)
			delete(l.byKey, c.key)
			out = append(out, c.key)
		} else if l.order.Len() == 1 {
			break
		}
		el = next
	}
	return out
}

// lastSeen is when the stored Event o was last seen (see lastSeen), or now when it does not say.
func (l *limit) lastSeen(o *cache.Object) time.Time {
	if t, err := time.Parse(time.RFC3339, lastSeen(o)); err == nil {
		return t
	}
	return l.clock.Now()
}
