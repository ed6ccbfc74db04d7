package reconciler

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
)

// Pause, step and resume (SPEC §16): a paused controller keeps watching and queueing, but its
// workers take no key; a step lets exactly one due key through and the controller is paused
// again. The state outlives leadership terms (Run calls).

var (
	// ErrNotRunning is returned by Step when the controller does not run here (this replica
	// does not lead).
	ErrNotRunning = errors.New("reconciler: the controller is not running (this replica does not lead)")
	// ErrNothingDue is returned by Step when no key is due: the queue is empty, or every key in
	// it waits (for a backoff, a planned requeue or a rollout step).
	ErrNothingDue = errors.New("reconciler: no key is due")
)

// Outcome is what one reconcile did to its key, as Step reports it.
type Outcome struct {
	Controller string    `json:"controller"`
	Key        cache.Key `json:"-"`
	// Object is "namespace/name", or "name" for a cluster-scoped object.
	Object string `json:"object"`
	// Result is "success", "conflict" (requeued at once), "error" (requeued with backoff, or
	// not at all for a terminal error) or "dropped" (after MaxRetries).
	Result string `json:"result"`
	Error  string `json:"error,omitempty"`
	// RequeueAfter is the planned requeue a success asked for.
	RequeueAfter string `json:"requeueAfter,omitempty"`
	Duration     string `json:"duration"`
	// Calls names the reconcile in the record of calls: GET /calls?reconcile=<Calls> lists the
	// writes it made.
	Calls string `json:"calls,omitempty"`
}

// gate holds workers while the controller is paused.
type gate struct {
	mu     sync.Mutex
	paused bool
	// step, when set, is waiting for a worker to take one key and send its Outcome.
	step chan<- Outcome
	// changed is closed, and replaced, on every change, to wake waiting workers.
	changed chan struct{}
}

func (g *gate) signalLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// wait blocks while the controller is paused with no step pending; false once ctx is done.
func (g *gate) wait(ctx context.Context) bool {
	for {
		g.mu.Lock()
		open, ch := !g.paused || g.step != nil, g.changed
		g.mu.Unlock()
		if open {
			return ctx.Err() == nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// admit says whether a worker that holds a key may process it, and where to send its Outcome
// when it is a step's key. A pending step takes the first key, paused or not.
func (g *gate) admit() (chan<- Outcome, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.step != nil {
		step := g.step
		g.step = nil
		return step, true
	}
	return nil, !g.paused
}

func (g *gate) setPaused(p bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.paused != p {
		g.paused = p
		g.signalLocked()
	}
}

// Pause stops the workers from taking keys; keys being reconciled finish. Events still
// enqueue keys, and Enqueue works: the queue fills and waits.
func (c *Controller) Pause() { c.gate.setPaused(true) }

// Resume lets the workers take keys again.
func (c *Controller) Resume() { c.gate.setPaused(false) }

// Paused reports whether the controller is paused.
func (c *Controller) Paused() bool {
	c.gate.mu.Lock()
	defer c.gate.mu.Unlock()
	return c.gate.paused
}

// Name is the controller's name (Config.Name).
func (c *Controller) Name() string { return c.cfg.Name }

// Resource is the resource the controller reconciles (Config.Resource).
func (c *Controller) Resource() cache.GroupResource { return c.cfg.Resource }

// Queue returns the keys the queue holds (see QueueItem), or nil when the controller is not
// running.
func (c *Controller) Queue() []QueueItem {
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q == nil {
		return nil
	}
	return q.view()
}

// Step pauses the controller if it runs unpaused, lets one worker take the next due key,
// and returns the Outcome of its reconcile; the controller stays paused. It fails with
// ErrNotRunning, ErrNothingDue, or ctx's error when ctx ends first (the key, if one was
// taken, is still reconciled).
func (c *Controller) Step(ctx context.Context) (Outcome, error) {
	c.stepMu.Lock()
	defer c.stepMu.Unlock()
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q == nil {
		return Outcome{}, ErrNotRunning
	}
	c.Pause()
	if !c.awaitDue(ctx, q) {
		return Outcome{}, ErrNothingDue
	}
	done := make(chan Outcome, 1)
	c.gate.mu.Lock()
	c.gate.step = done
	c.gate.signalLocked()
	c.gate.mu.Unlock()
	select {
	case out := <-done:
		return out, nil
	case <-ctx.Done():
		c.gate.mu.Lock()
		if c.gate.step == done {
			c.gate.step = nil
		}
		c.gate.mu.Unlock()
		return Outcome{}, ctx.Err()
	}
}

// awaitDue reports whether a key is due for a worker. A key whose wait has just ended (the
// clock moved) is added by the work queue's own goroutine a moment later: that moment is
// waited for, briefly.
func (c *Controller) awaitDue(ctx context.Context, q *queue) bool {
	for range 200 {
		if q.Len() > 0 {
			return true
		}
		due := false
		for _, it := range q.view() {
			if it.State == "due" {
				due = true
				break
			}
		}
		if !due {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return q.Len() > 0
}
