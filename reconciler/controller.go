package reconciler

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/calls"
	"github.com/opemu/opemu/metrics"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// Source is what a controller watches, like an informer: the store, or the in-process client
// over it.
type Source interface {
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
}

// Tuning is how a controller runs: its workers, resync, retries and pace, and the metrics,
// log and clock it runs with. A server gives every controller it runs the same Tuning (the
// Application's, the simulated workloads', each Controller object's: package hooks). Zero values
// are documented defaults.
type Tuning struct {
	// Workers is how many keys are reconciled at once. Zero means 2.
	Workers int
	// ResyncInterval enqueues every object this often; zero disables resync.
	ResyncInterval time.Duration
	// MaxRetries is how many rate-limited retries a failing key gets; the next failure drops it.
	// Negative means none; zero means 5.
	MaxRetries int
	// BackoffBase and BackoffMax bound the per-key exponential backoff. Zero means 1 s and 16 s.
	BackoffBase, BackoffMax time.Duration
	// QPS and Burst size the token bucket for rate-limited requeues. Zero means 10 and 100.
	QPS   float64
	Burst int
	// Metrics may be nil.
	Metrics *metrics.Registry
	// Logger nil means slog.Default().
	Logger *slog.Logger
	// Clock times requeues, backoff and resync. Nil means the real clock.
	Clock clock.WithTicker
}

// Config configures a Controller. Store, Resource and Reconciler are required; zero values
// are documented defaults.
type Config struct {
	Store      Source
	Resource   cache.GroupResource
	Reconciler Reconciler
	// Name labels metrics and logs. Empty means the resource name.
	Name string
	Tuning
}

// Controller watches one resource and reconciles its objects with a work queue.
type Controller struct {
	cfg Config
	// reconciles numbers the reconciles, for the record of calls (Outcome.Calls).
	reconciles atomic.Uint64

	// mu guards queue, known, phase and dropped.
	mu    sync.Mutex
	queue *queue // nil while not running
	// known is the informer's cache: the objects of the watch events as the store made them,
	// immutable and shared with the store and every other watcher. The controller reads them
	// through their accessors only (indexed fields, never a decode) and never changes them; a
	// reconciler reads the object itself and decodes its own copy.
	known map[cache.Key]*cache.Object
	phase map[cache.Key]string // status.phase of known objects, for counts
	// dropped holds the keys given up on after MaxRetries, with the object as it was then. A
	// dropped key is not queued again, by the resync or a re-list (this term's or the next),
	// until its object changes in a way the controller acts on (matters), or Enqueue asks for
	// it. It outlives leadership terms, as the pause state does.
	dropped map[cache.Key]*cache.Object

	// gate holds the workers while the controller is paused (SPEC §16).
	gate gate
	// stepMu lets one Step run at a time.
	stepMu sync.Mutex
}

// New validates cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Store == nil || cfg.Reconciler == nil || cfg.Resource.Resource == "" {
		return nil, errors.New("reconciler: Store, Resource and Reconciler are required")
	}
	if cfg.Name == "" {
		cfg.Name = cfg.Resource.Resource
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 5
	} else if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 16 * time.Second
	}
	if cfg.QPS <= 0 {
		cfg.QPS = 10
	}
	if cfg.Burst <= 0 {
		cfg.Burst = 100
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Controller{cfg: cfg, known: map[cache.Key]*cache.Object{}, phase: map[cache.Key]string{},
		dropped: map[cache.Key]*cache.Object{}, gate: gate{changed: make(chan struct{})}}, nil
}

// Run lists and watches the resource, enqueues every object (a full resync), and reconciles
// with Config.Workers workers until ctx is done. It returns once every worker has finished
// its current item and exited. Run may be called again after it returns (each leadership term
// calls it anew).
func (c *Controller) Run(ctx context.Context) error {
	q := newQueue(c.cfg.Name, c.cfg.BackoffBase, c.cfg.BackoffMax, c.cfg.QPS, c.cfg.Burst, c.cfg.Metrics, c.cfg.Clock)
	c.mu.Lock()
	c.queue = q
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.queue = nil
		c.mu.Unlock()
	}()
	var wg sync.WaitGroup
	wg.Go(func() { c.inform(ctx, q) })
	if c.cfg.ResyncInterval > 0 {
		wg.Go(func() { c.resync(ctx, q) })
	}
	for range c.cfg.Workers {
		wg.Go(func() { c.work(ctx, q) })
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
	return nil
}

// Enqueue asks for an immediate reconcile of key (a key given up on gets a fresh round of
// retries). It reports false when the controller is not running (not leading).
func (c *Controller) Enqueue(key cache.Key) bool {
	c.mu.Lock()
	q := c.queue
	if q != nil {
		delete(c.dropped, key)
	}
	c.mu.Unlock()
	if q == nil {
		return false
	}
	q.Add(key)
	return true
}

// Dropped returns the objects ("namespace/name") whose keys were given up on after MaxRetries
// and wait for a change, sorted.
func (c *Controller) Dropped() []string {
	c.mu.Lock()
	out := make([]string, 0, len(c.dropped))
	for k := range c.dropped {
		out = append(out, objectName(k))
	}
	c.mu.Unlock()
	slices.Sort(out)
	return out
}

// Running reports whether Run is active.
func (c *Controller) Running() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.queue != nil
}

// PhaseCounts returns how many known objects are in each status.phase ("" not counted).
func (c *Controller) PhaseCounts() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, p := range c.phase {
		if p != "" {
			out[p]++
		}
	}
	return out
}

// enqueue adds key now, or when the reconciler says its next step is due.
func (c *Controller) enqueue(q *queue, key cache.Key) {
	if s, ok := c.cfg.Reconciler.(Scheduler); ok {
		if d := s.NotBefore(key).Sub(c.cfg.Clock.Now()); d > 0 {
			q.AddAfter(key, d)
			return
		}
	}
	q.Add(key)
}

// inform is the informer: list and watch in one step (SendInitialEvents), re-listing when the
// watch ends early (it fell behind). A key is enqueued on create, on delete and on updates
// that change generation, labels, annotations, finalizers or deletionTimestamp; status-only
// writes (the controller's own) are not.
func (c *Controller) inform(ctx context.Context, q *queue) {
	for ctx.Err() == nil {
		w, err := c.cfg.Store.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{c.cfg.Resource}, SendInitialEvents: true})
		if err != nil {
			c.cfg.Logger.Warn("informer watch", "controller", c.cfg.Name, "err", err)
			return
		}
		listed := map[cache.Key]bool{}
		initial := true
		for ev := range w.Events() {
			if initial {
				if ev.Type == cache.Bookmark {
					initial = false
					c.forgetUnlisted(q, listed)
					continue
				}
				listed[ev.Object.Key()] = true
			}
			c.handle(q, ev, initial)
		}
		if ctx.Err() != nil || errors.Is(w.Err(), cache.ErrClosed) {
			return
		}
		c.cfg.Logger.Info("informer re-listing", "controller", c.cfg.Name, "reason", w.Err())
	}
}

// forgetUnlisted handles objects deleted while a re-list was pending.
func (c *Controller) forgetUnlisted(q *queue, listed map[cache.Key]bool) {
	c.mu.Lock()
	var gone []cache.Key
	for k := range c.known {
		if !listed[k] {
			gone = append(gone, k)
			delete(c.known, k)
			delete(c.phase, k)
		}
	}
	c.mu.Unlock()
	for _, k := range gone {
		q.Add(k)
	}
}

func (c *Controller) handle(q *queue, ev cache.Event, initial bool) {
	key := ev.Object.Key()
	c.mu.Lock()
	old := c.known[key]
	if ev.Type == cache.Deleted {
		delete(c.known, key)
		delete(c.phase, key)
	} else {
		c.known[key] = ev.Object
		c.phase[key] = ev.Object.Field("status.phase")
	}
	// A key given up on stays given up while its object does not change in a way that
	// matters: its own status writes (phase Failed), a re-list, the next term's list.
	gaveUp := false
	if d, ok := c.dropped[key]; ok {
		if ev.Type != cache.Deleted && !matters(d, ev.Object) {
			gaveUp = true
		} else {
			delete(c.dropped, key)
		}
	}
	c.mu.Unlock()
	switch {
	case gaveUp:
	case ev.Type == cache.Deleted:
		q.Add(key)
	case initial || old == nil || ev.Type == cache.Added:
		c.enqueue(q, key)
	case matters(old, ev.Object):
		c.enqueue(q, key)
	}
}

// matters reports whether the change from old to cur is one the controller acts on.
func matters(old, cur *cache.Object) bool {
	return old.Generation() != cur.Generation() ||
		old.Deleting() != cur.Deleting() ||
		!old.SameLabelsAndAnnotations(cur) ||
		!slices.Equal(old.Finalizers(), cur.Finalizers())
}

// resync enqueues every known object every ResyncInterval (drift detection), but for keys
// that already have their next pass planned: one waiting out a failure's backoff (the resync
// must not cut a retry short: the history shows the backoff), one given up on after
// MaxRetries (it waits for a change), and one whose next step the reconciler paces
// (enqueue: no earlier than NotBefore).
func (c *Controller) resync(ctx context.Context, q *queue) {
	t := c.cfg.Clock.NewTicker(c.cfg.ResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			c.mu.Lock()
			keys := slices.Collect(maps.Keys(c.known))
			c.mu.Unlock()
			for _, k := range keys {
				// Requeues first, then dropped: a key given up on is marked dropped before its
				// requeues are forgotten (work), so either check sees it.
				if q.NumRequeues(k) != 0 {
					continue
				}
				c.mu.Lock()
				_, gaveUp := c.dropped[k]
				c.mu.Unlock()
				if !gaveUp {
					c.enqueue(q, k)
				}
			}
		}
	}
}

// work takes keys until the queue shuts down or ctx is done. While the controller is paused
// it takes none, except the one key of a Step.
func (c *Controller) work(ctx context.Context, q *queue) {
	for c.gate.wait(ctx) {
		key, shutdown := q.Get()
		if shutdown {
			return
		}
		// A worker that was already waiting in Get when the controller paused gets here with a
		// key it may not process: it goes back, unprocessed, to the back of the queue.
		step, ok := c.gate.admit()
		if !ok {
			q.putBack(key)
			continue
		}
		out := c.process(ctx, q, key)
		if step != nil {
			step <- out
		}
	}
}

// process reconciles key and decides what becomes of it: forgotten, requeued at once (a
// conflict), requeued with backoff (a failure), or dropped after MaxRetries.
func (c *Controller) process(ctx context.Context, q *queue, key cache.Key) Outcome {
	defer q.Done(key)
	start := time.Now()
	// The calls this reconcile makes through the in-process client are marked with it.
	id := c.cfg.Name + "#" + strconv.FormatUint(c.reconciles.Add(1), 10)
	res, err := c.cfg.Reconciler.Reconcile(calls.WithReconcile(ctx, id), key)
	d := time.Since(start)
	out := Outcome{Controller: c.cfg.Name, Key: key, Object: objectName(key), Duration: d.String(), Calls: id}
	if err != nil {
		out.Error = err.Error()
	}
	switch {
	case err == nil:
		out.Result = "success"
		q.Forget(key)
		if res.RequeueAfter > 0 {
			out.RequeueAfter = res.RequeueAfter.String()
			q.AddAfter(key, res.RequeueAfter)
		}
	case IsConflict(err):
		// Someone wrote the object meanwhile: try again on the new state, not as a failure.
		out.Result = "conflict"
		q.Add(key)
	case isTerminal(err):
		out.Result = "error"
		c.cfg.Metrics.ReconcileError(c.cfg.Name)
		q.Forget(key)
	case q.NumRequeues(key) < c.cfg.MaxRetries:
		out.Result = "error"
		c.cfg.Metrics.ReconcileError(c.cfg.Name)
		q.AddRateLimited(key)
	default:
		out.Result = "dropped"
		c.cfg.Metrics.ReconcileError(c.cfg.Name)
		c.mu.Lock()
		if obj, ok := c.known[key]; ok {
			c.dropped[key] = obj
		}
		c.mu.Unlock()
		q.Forget(key) // after it is marked dropped: see resync
		c.cfg.Logger.Warn("dropping key after retries", "controller", c.cfg.Name, "key", key.String(), "retries", c.cfg.MaxRetries, "err", err)
		if dr, ok := c.cfg.Reconciler.(Dropper); ok {
			dr.Dropped(ctx, key, err)
		}
	}
	if out.Result != "dropped" {
		c.mu.Lock()
		delete(c.dropped, key) // it was queued again (a change while it was being given up on)
		c.mu.Unlock()
	}
	c.cfg.Metrics.ObserveReconcile(c.cfg.Name, out.Result, d)
	return out
}

// IsConflict reports whether err is a 409, which a controller retries at once, not as a failure
// (SPEC §8): the store's (a resourceVersion that moved on) or the write path's (a precondition
// such as a uid that no longer matches, apierrors.NewConflict), however wrapped.
func IsConflict(err error) bool {
	return errors.Is(err, cache.ErrConflict) || apierrors.IsConflict(err)
}
