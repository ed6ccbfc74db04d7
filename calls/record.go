package calls

import (
	"sync"
	"sync/atomic"
)

// DefaultSize is the number of calls a Record keeps when Config.Size is zero: enough for the
// calls of a test suite of a few hundred reconciles (about 4.5 MB at ~450 bytes a call; see
// BenchmarkRecordMemory and docs/PERFORMANCE.md).
const DefaultSize = 10000

// Config configures a Record.
type Config struct {
	// Size is how many calls the ring keeps (CALL_HISTORY); the oldest is dropped first. Zero
	// means DefaultSize.
	Size int
	// Sink, when set, is given every call as it is recorded, before the ring's copy is made
	// (the audit log). It is called on the request's goroutine and must not keep c.
	Sink func(c *Call)
}

// Record is the bounded ring of the latest calls, and the subscribers told of each new one.
type Record struct {
	sink func(*Call)

	mu    sync.RWMutex
	ring  []entry // ring[(id-1)%len(ring)] holds call id
	arena arena   // the strings of the ring's calls
	last  uint64  // the ID of the latest call; 0 when none
	subs  map[*Subscription]struct{}
	// nsubs mirrors len(subs), read without the lock on the hot path.
	nsubs atomic.Int32
}

// New returns an empty Record.
func New(cfg Config) *Record {
	if cfg.Size <= 0 {
		cfg.Size = DefaultSize
	}
	return &Record{sink: cfg.Sink, ring: make([]entry, cfg.Size), subs: map[*Subscription]struct{}{}}
}

// Size is how many calls the ring keeps.
func (r *Record) Size() int {
	if r == nil {
		return 0
	}
	return len(r.ring)
}

// Add records c (its ID is set here) and tells the subscribers. The Record keeps a copy, without
// c.Body and with strings of its own (entry.go); the caller keeps c.
func (r *Record) Add(c *Call) {
	r.put(c, func() {
		r.last++
		c.ID = r.last
		r.ring[(r.last-1)%uint64(len(r.ring))].pack(c, &r.arena)
	})
}

// Finish records the end of c, a call Add recorded open (a watch): its slot, if the ring
// still holds it, is replaced by c, and the sink and subscribers are told again.
func (r *Record) Finish(c *Call) {
	r.put(c, func() {
		if slot := &r.ring[(c.ID-1)%uint64(len(r.ring))]; slot.id == c.ID {
			slot.pack(c, &r.arena)
		}
	})
}

// put gives c to the sink, then, without its body and annotations and under the lock, stores
// it and sends it to the subscribers.
func (r *Record) put(c *Call, store func()) {
	if r == nil {
		return
	}
	if r.sink != nil {
		r.sink(c)
	}
	body, bodyType, annotations := c.Body, c.BodyType, c.Annotations
	c.Body, c.BodyType, c.Annotations = nil, "", nil
	r.mu.Lock()
	store()
	if r.nsubs.Load() > 0 {
		for s := range r.subs {
			s.send(c)
		}
	}
	r.mu.Unlock()
	c.Body, c.BodyType, c.Annotations = body, bodyType, annotations
}

// Last returns the ID of the latest call (0 when none).
func (r *Record) Last() uint64 {
	if r == nil {
		return 0
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.last
}

// List returns the calls the ring still holds that f matches, oldest first; at most f.Limit
// of the newest when f.Limit > 0.
func (r *Record) List(f Filter) []Call {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	first := uint64(1)
	if n := uint64(len(r.ring)); r.last > n {
		first = r.last - n + 1
	}
	if f.After >= first {
		first = f.After + 1
	}
	var out []Call
	for id := first; id <= r.last; id++ {
		c := r.ring[(id-1)%uint64(len(r.ring))].unpack()
		if f.Match(&c) {
			out = append(out, c)
		}
	}
	if f.Limit > 0 && len(out) > f.Limit {
		out = out[len(out)-f.Limit:]
	}
	return out
}

// Subscription receives the calls recorded after Subscribe, in order, on C. A subscriber that
// does not keep up misses calls (Missed counts them) rather than slowing requests down. Its
// owner must Close it, which closes C; the Record never closes C otherwise.
type Subscription struct {
	// C carries the calls. Buffered; closed by Close.
	C <-chan Call

	r      *Record
	c      chan Call
	filter Filter
	missed atomic.Int64
	once   sync.Once
}

// Subscribe returns a subscription to the calls f matches, with room for buffer calls that
// have not been read yet (at least 1).
func (r *Record) Subscribe(f Filter, buffer int) *Subscription {
	if buffer < 1 {
		buffer = 1
	}
	ch := make(chan Call, buffer)
	s := &Subscription{C: ch, r: r, c: ch, filter: f}
	if r == nil {
		close(ch)
		return s
	}
	r.mu.Lock()
	r.subs[s] = struct{}{}
	r.nsubs.Store(int32(len(r.subs)))
	r.mu.Unlock()
	return s
}

// send is called under r.mu.
func (s *Subscription) send(c *Call) {
	if !s.filter.Match(c) {
		return
	}
	select {
	case s.c <- *c:
	default:
		s.missed.Add(1)
	}
}

// Missed is how many matching calls the subscriber missed because its buffer was full.
func (s *Subscription) Missed() int64 { return s.missed.Load() }

// Close ends the subscription and closes C. Idempotent.
func (s *Subscription) Close() {
	s.once.Do(func() {
		if s.r != nil {
			s.r.mu.Lock()
			delete(s.r.subs, s)
			s.r.nsubs.Store(int32(len(s.r.subs)))
			s.r.mu.Unlock()
			close(s.c)
		}
	})
}
