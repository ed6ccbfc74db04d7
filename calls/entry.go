package calls

import (
	"time"
	"unsafe"
)

// The ring keeps each call packed (an entry): its strings copied, end to end, into the
// Record's arena, and its numbers beside them. A Call holds some twenty pointers into the
// request that made it (its URI, its headers); kept as they are, ten thousand of them would
// keep those requests' strings alive, scattered over the heap, give the garbage collector
// some two hundred thousand pointers to follow, and make each copy into the ring a write
// barrier per pointer. An entry has three pointers (its strings, its groups, its start's
// location) and the arena is memory the collector does not scan.

// nStrings is how many string fields a Call has; pack and unpack list them in one order.
const nStrings = 16

// entry is a Call as the ring keeps it (without its Body).
type entry struct {
	id          uint64
	start       time.Time
	latency     time.Duration
	strs        string // the Call's strings, end to end, in the arena
	ends        [nStrings]uint32
	groups      []string // shared with the caller's Call: a user's groups are not rewritten
	rv          uint64
	watchEvents int64
	code        int32
	open        bool
	internal    bool
	forbidden   bool
}

// pack stores c in e, its strings copied into a, one after the other in the order unpack
// reads them.
func (e *entry) pack(c *Call, a *arena) {
	n := len(c.User) + len(c.UID) + len(c.UserAgent) + len(c.FieldManager) + len(c.SourceIP) + len(c.Verb) +
		len(c.APIGroup) + len(c.APIVersion) + len(c.Resource) + len(c.Subresource) + len(c.Namespace) + len(c.Name) +
		len(c.RequestURI) + len(c.Reason) + len(c.Component) + len(c.Reconcile)
	b := a.alloc(n)[:0]
	put := func(i int, s string) {
		b = append(b, s...)
		e.ends[i] = uint32(len(b))
	}
	put(0, c.User)
	put(1, c.UID)
	put(2, c.UserAgent)
	put(3, c.FieldManager)
	put(4, c.SourceIP)
	put(5, c.Verb)
	put(6, c.APIGroup)
	put(7, c.APIVersion)
	put(8, c.Resource)
	put(9, c.Subresource)
	put(10, c.Namespace)
	put(11, c.Name)
	put(12, c.RequestURI)
	put(13, c.Reason)
	put(14, c.Component)
	put(15, c.Reconcile)
	e.strs = a.string(b)
	e.id, e.start, e.latency, e.groups = c.ID, c.Start, c.Latency, c.Groups
	e.rv, e.watchEvents, e.code = c.ResourceVersion, c.WatchEvents, c.Code
	e.open, e.internal, e.forbidden = c.Open, c.Internal, c.Forbidden
}

// unpack returns the Call e holds; its strings share e's arena (nothing is copied).
func (e *entry) unpack() Call {
	var s [nStrings]string
	from := uint32(0)
	for i, to := range e.ends {
		s[i] = e.strs[from:to]
		from = to
	}
	return Call{ID: e.id, Start: e.start, Latency: e.latency, User: s[0], UID: s[1], Groups: e.groups, UserAgent: s[2],
		FieldManager: s[3], SourceIP: s[4], Verb: s[5], APIGroup: s[6], APIVersion: s[7], Resource: s[8],
		Subresource: s[9], Namespace: s[10], Name: s[11], RequestURI: s[12], Code: e.code, Reason: s[13],
		ResourceVersion: e.rv, WatchEvents: e.watchEvents, Open: e.open, Internal: e.internal, Component: s[14],
		Reconcile: s[15], Forbidden: e.forbidden}
}

// arenaChunk is the size of the arena's blocks: a block is freed by the garbage collector
// once the ring no longer holds a call whose strings it has, so a ring of n calls keeps their
// strings and at most one block more.
const arenaChunk = 32 << 10

// arena is append-only memory for the strings of entries. Bytes handed out are written once,
// by pack, before they become a string, and never again: a full block is left to the garbage
// collector, never reused. Not safe for concurrent use (the Record's lock guards it).
type arena struct {
	block []byte // the current block; len is how much of it is used
}

// alloc returns n bytes of fresh memory (its capacity n too, so appends stay inside it).
func (a *arena) alloc(n int) []byte {
	if n == 0 {
		return nil
	}
	if cap(a.block)-len(a.block) < n {
		a.block = make([]byte, 0, max(arenaChunk, n))
	}
	at := len(a.block)
	a.block = a.block[:at+n]
	return a.block[at : at+n : at+n]
}

// string returns buf, which alloc returned and pack has filled, as a string without copying
// it (its bytes are never written again).
func (a *arena) string(buf []byte) string {
	if len(buf) == 0 {
		return ""
	}
	return unsafe.String(&buf[0], len(buf))
}
