package leader

import (
	"context"
	"sync"
	"time"

	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// term is the lock as client-go's elector sees it: every call goes through to the backend's
// lock, and term keeps from them how long this process's leadership lasts. A write naming
// this process that succeeded holds the lease until RenewDeadline (at most the lease duration
// the record states) after the write began; a read naming another holder ends it at once.
//
// Why not client-go's own view: a follower takes the lease once it has seen the record
// unchanged for the record's lease duration, and it cannot see a write before the write began,
// so the bound above always ends before any follower can take over. client-go's elector times
// RenewDeadline from the start of a renewal round instead, so a leader starved between rounds,
// or in a write that landed but did not return (fsync), keeps leading for a whole
// RenewDeadline after a follower took over.
//
// The clock is the real one (time.Now), like client-go's elector: leases are judged in real
// time, by every process on the same monotonic clock.
type term struct {
	rl.Interface
	renewDeadline time.Duration

	mu    sync.Mutex
	until time.Time          // the lease is held until then; zero when not held
	end   context.CancelFunc // ends the campaign while its term may still run; nil otherwise
	held  bool               // the campaign has held the lease
	timer *time.Timer        // fires lapse at until
}

var _ rl.Interface = (*term)(nil)

// begin starts watching a campaign: end is called (once) when its term lapses or is lost.
func (t *term) begin(end context.CancelFunc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.end, t.until, t.held = end, time.Time{}, false
}

// finish stops watching the campaign and reports whether it held the lease.
func (t *term) finish() (held bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.timer != nil {
		t.timer.Stop()
	}
	t.end, t.until = nil, time.Time{}
	return t.held
}

// holds reports whether the lease is this process's now.
func (t *term) holds() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return !t.until.IsZero() && time.Now().Before(t.until)
}

// wrote records that r, whose write began at start, is the record now.
func (t *term) wrote(start time.Time, r rl.LeaderElectionRecord) {
	if r.HolderIdentity != t.Identity() {
		return
	}
	d := min(t.renewDeadline, time.Duration(r.LeaseDurationSeconds)*time.Second)
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.end == nil { // the term ended: this campaign leads no more, whatever its late writes did
		return
	}
	if until := start.Add(d); until.After(t.until) {
		t.until = until
	}
	t.held = true
	if t.timer == nil {
		t.timer = time.AfterFunc(time.Until(t.until), t.lapse)
	} else {
		t.timer.Reset(time.Until(t.until))
	}
}

// lapse ends the term if no renewal extended it meanwhile.
func (t *term) lapse() {
	t.mu.Lock()
	if t.end == nil || time.Now().Before(t.until) {
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	t.lose()
}

// lose ends the running term, if there is one.
func (t *term) lose() {
	t.mu.Lock()
	end := t.end
	if t.until.IsZero() {
		end = nil // campaigning, not leading: another holder is what it expects to read
	} else {
		t.end, t.until = nil, time.Time{}
	}
	t.mu.Unlock()
	if end != nil {
		end()
	}
}

// Get reads the record; one naming another holder ends this process's term.
func (t *term) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	r, raw, err := t.Interface.Get(ctx)
	if err == nil && r.HolderIdentity != t.Identity() {
		t.lose()
	}
	return r, raw, err
}

// Create writes the first record.
func (t *term) Create(ctx context.Context, r rl.LeaderElectionRecord) error {
	return t.write(r, func() error { return t.Interface.Create(ctx, r) })
}

// Update writes r over the record last read or written.
func (t *term) Update(ctx context.Context, r rl.LeaderElectionRecord) error {
	return t.write(r, func() error { return t.Interface.Update(ctx, r) })
}

// write runs fn, which writes r, and records r if it succeeded, timed from before fn began.
func (t *term) write(r rl.LeaderElectionRecord, fn func() error) error {
	start := time.Now()
	err := fn()
	if err == nil {
		t.wrote(start, r)
	}
	return err
}
