package events

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/opemu/opemu/cache"
)

// Late stands in for a Recorder made after its users. The write path records Events through the
// recorder and counts them against its limit, and the recorder writes Events through the write
// path, so the write path is made first with a Late, which is Set once the recorder exists.
// Until then it records and counts nothing. It is safe for concurrent use.
type Late struct{ r atomic.Pointer[Recorder] }

// Set makes l forward to r.
func (l *Late) Set(r *Recorder) { l.r.Store(r) }

// Record records ev with the recorder.
func (l *Late) Record(ctx context.Context, ev Event) { l.r.Load().Record(ctx, ev) }

// Track counts the client Event at key (see Recorder.Track); before Set it counts nothing.
func (l *Late) Track(key cache.Key, last time.Time) ([]cache.Key, bool) {
	if r := l.r.Load(); r != nil {
		return r.Track(key, last)
	}
	return nil, false
}

// Stored confirms the Event at key was written (see Recorder.Stored); true before Set.
func (l *Late) Stored(key cache.Key) bool {
	if r := l.r.Load(); r != nil {
		return r.Stored(key)
	}
	return true
}

// Untrack forgets the Event at key (see Recorder.Untrack).
func (l *Late) Untrack(key cache.Key) {
	if r := l.r.Load(); r != nil {
		r.Untrack(key)
	}
}
