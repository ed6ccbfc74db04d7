package cache

// history is a bounded ring of one resource's most recent watch events, oldest first. It is
// guarded by the Store's mutex.
type history struct {
	buf   []Event
	start int // index of the oldest event once buf is full
	cap   int
	// since is the version a resume must be at or after: every event newer than it is still
	// in buf. It starts at the store's first version and moves up as events are evicted.
	since uint64
}

func (h *history) init(capacity int, since uint64) {
	h.cap, h.since = capacity, since
}

func (h *history) add(ev Event) {
	if len(h.buf) < h.cap {
		h.buf = append(h.buf, ev)
		return
	}
	h.since = h.buf[h.start].ResourceVersion
	h.buf[h.start] = ev
	h.start = (h.start + 1) % h.cap
}

// after calls fn, oldest first, for every event newer than rv.
func (h *history) after(rv uint64, fn func(Event)) {
	n := len(h.buf)
	// Binary search for the first event newer than rv in ring order.
	lo, hi := 0, n
	for lo < hi {
		mid := (lo + hi) / 2
		if h.buf[(h.start+mid)%n].ResourceVersion > rv {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	for i := lo; i < n; i++ {
		fn(h.buf[(h.start+i)%n])
	}
}
