package cache

// history is one resource's most recent watch events, oldest first, bounded by count
// (Config.WatchHistory). The store bounds the bytes of every history together
// (Config.WatchHistoryBytes, see trimHistoryLocked). It is guarded by the Store's mutex.
type history struct {
	// ring holds the events, oldest at head, n of them; it wraps around, so a full history
	// takes an event and drops the oldest without moving or reallocating the others. Evicted
	// slots are zeroed so they pin nothing. It grows (doubling, up to max) while it fills.
	ring  []slot
	head  int
	n     int
	max   int
	bytes int64 // sum of eventSize over events
	// since is the version a resume must be at or after: every event newer than it is still
	// in events. It starts at the store's first version and moves up as events are evicted.
	since uint64
	// sinceShared: since is a version several events share (one etcd transaction) and at
	// least one of them was evicted, so a watch cannot replay that version whole: a watch
	// resuming at since gets ErrGone (see Watch). Lists are unaffected (a list at since needs
	// none of since's events).
	sinceShared bool
}

// eventOverhead approximates what an event keeps alive besides its encoded objects: the
// Object structs with their index, and the history slot.
const eventOverhead = 256

// eventSize is what an event in history is charged: the encoded bytes of its object and of
// the previous state it carries (a MODIFIED or DELETED event pins both), plus eventOverhead.
// Counting the previous state even when another event shares it errs on the side of keeping
// less.
func eventSize(ev Event) int64 {
	n := int64(eventOverhead)
	if ev.Object != nil {
		n += int64(len(ev.Object.raw))
	}
	if ev.prev != nil {
		n += int64(len(ev.prev.raw))
	}
	return n
}

// slot is one event in the ring with the size it was charged, so evicting it reads nothing of
// the (long cold) objects it holds.
type slot struct {
	ev   Event
	size int64
}

func (h *history) init(max int, since uint64) {
	h.max, h.since, h.sinceShared = max, since, false
}

// add appends ev, evicting the oldest event when the count bound is reached, and returns how
// many bytes the history grew by (negative when it shrank).
func (h *history) add(ev Event) int64 {
	var freed int64
	if h.n >= h.max {
		freed = h.evictOldest()
	}
	if h.n == len(h.ring) {
		h.grow()
	}
	size := eventSize(ev)
	h.ring[(h.head+h.n)%len(h.ring)] = slot{ev, size}
	h.n++
	h.bytes += size
	if ev.ResourceVersion == h.since {
		h.sinceShared = true // it joins a version an event of which was evicted
	}
	return size - freed
}

// grow makes room for one more event: twice the ring (at least 16, at most max), oldest
// first from index 0.
func (h *history) grow() {
	size := min(max(2*len(h.ring), 16), max(h.max, 1))
	ring := make([]slot, size)
	for i := range h.n {
		ring[i] = h.ring[(h.head+i)%len(h.ring)]
	}
	h.ring, h.head = ring, 0
}

// at is the i-th oldest event.
func (h *history) at(i int) Event { return h.ring[(h.head+i)%len(h.ring)].ev }

// evictOldest drops the oldest event and returns its size; 0 when the history is empty.
func (h *history) evictOldest() int64 {
	if h.n == 0 {
		return 0
	}
	old := h.ring[h.head]
	size := old.size
	if rv := old.ev.ResourceVersion; rv == h.since {
		h.sinceShared = true // an event of the same version went before
	} else {
		h.since, h.sinceShared = rv, false
	}
	h.ring[h.head] = slot{}
	h.head = (h.head + 1) % len(h.ring)
	h.n--
	h.bytes -= size
	if h.n == 0 {
		h.ring, h.head = nil, 0 // let the emptied array go
	} else if h.at(0).ResourceVersion == h.since {
		h.sinceShared = true // an event of the same version stays
	}
	return size
}

// after calls fn, oldest first, for every event newer than rv.
func (h *history) after(rv uint64, fn func(Event)) {
	// Binary search for the first event newer than rv.
	lo, hi := 0, h.n
	for lo < hi {
		mid := (lo + hi) / 2
		if h.at(mid).ResourceVersion > rv {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	for i := lo; i < h.n; i++ {
		fn(h.at(i))
	}
}

// trimHistoryLocked evicts events until every history together is within
// Config.WatchHistoryBytes, taking the oldest event of the resource whose history is largest
// each time: a resource churning large objects pays for its own churn before another
// resource's watchers lose their resume points. A resume from an evicted version answers
// ErrGone (410) as it does past the count bound.
func (c *watchCache) trimHistoryLocked() {
	for c.historyBytes > c.cfg.WatchHistoryBytes {
		var largest *resourceState
		for _, st := range c.resources {
			if st.history.n > 0 && (largest == nil || st.history.bytes > largest.history.bytes) {
				largest = st
			}
		}
		if largest == nil {
			return
		}
		c.historyBytes -= largest.history.evictOldest()
	}
}
