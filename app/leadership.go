package app

import (
	"context"
	"sync"
)

// leadership runs the leader's work in terms, so that a restore can stop it and start it again
// afresh: the controllers and the collector end their term (each worker finishes its item),
// the store is replaced while nothing of theirs runs, and the next term starts from a full
// list, as every leadership term does. A restore never races a reconcile or a collection
// decided on the state it replaces.
type leadership struct {
	// mu guards the fields below.
	mu      sync.Mutex
	resumed chan struct{}      // closed when the pause ends; nil while not paused
	cancel  context.CancelFunc // ends the running term; nil when none runs
	done    chan struct{}      // closed when the running term's work has returned
}

// run runs work in terms until ctx ends: each term's context ends with ctx or at a pause;
// while paused, no term runs. It returns once the last term's work has.
func (l *leadership) run(ctx context.Context, work func(context.Context)) {
	for {
		l.mu.Lock()
		for l.resumed != nil {
			resumed := l.resumed
			l.mu.Unlock()
			select {
			case <-resumed:
			case <-ctx.Done():
				return
			}
			l.mu.Lock()
		}
		if ctx.Err() != nil {
			l.mu.Unlock()
			return
		}
		term, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		l.cancel, l.done = cancel, done
		l.mu.Unlock()
		work(term)
		cancel()
		l.mu.Lock()
		l.cancel, l.done = nil, nil
		l.mu.Unlock()
		close(done)
		if ctx.Err() != nil {
			return
		}
	}
}

// pause ends the running term, if any, waits for its work to return, and holds the next term
// until resume is called. One pause at a time (restores are serialised).
func (l *leadership) pause() (resume func()) {
	l.mu.Lock()
	l.resumed = make(chan struct{})
	cancel, done := l.cancel, l.done
	l.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	return sync.OnceFunc(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		close(l.resumed)
		l.resumed = nil
	})
}
