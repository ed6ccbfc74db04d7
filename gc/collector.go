package gc

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
)

// Source is the component name on the collector's Events, as Kubernetes names it.
const Source = "garbage-collector-controller"

// Client is how the collector reads and writes: the in-process API client (registry.Client),
// so its writes pass the write path's rules like a client's.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	DeletePropagating(ctx context.Context, key cache.Key, pre cache.Preconditions, policy metav1.DeletionPropagation) (*cache.Object, bool, error)
}

// Kinds resolves an owner reference's apiVersion and kind to a served kind, and a stored
// resource to its kind (*kinds.Registry implements it).
type Kinds interface {
	ForKind(apiVersion, kind string) (*kinds.Kind, bool)
	Resource(gr cache.GroupResource) (*kinds.Kind, bool)
}

// EventRecorder records Events (*events.Recorder implements it).
type EventRecorder interface {
	Record(ctx context.Context, ev events.Event)
}

// Config configures a Collector. Client and Kinds are required; zero values are documented
// defaults.
type Config struct {
	Client Client
	Kinds  Kinds
	// Events receives the Warnings about invalid references; nil records none.
	Events EventRecorder
	// Workers is how many objects are looked at at once. Zero means 2.
	Workers int
	// BackoffBase and BackoffMax bound the per-object backoff after a failed attempt (an
	// owner's kind not served, a write refused). Zero means 50 ms and 30 s.
	BackoffBase, BackoffMax time.Duration
	// Logger nil means slog.Default().
	Logger *slog.Logger
	// Clock times the backoff. Nil means the real clock.
	Clock clock.WithTicker
}

// Collector is the garbage collector. Create it with New; Run it while leading.
type Collector struct {
	cfg    Config
	absent absent

	// mu guards graph and queue, which are nil while not running.
	mu    sync.Mutex
	graph *graph
	queue workqueue.TypedRateLimitingInterface[string]
}

// New validates cfg.
func New(cfg Config) (*Collector, error) {
	if cfg.Client == nil || cfg.Kinds == nil {
		return nil, errors.New("gc: Client and Kinds are required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 2
	}
	if cfg.BackoffBase <= 0 {
		cfg.BackoffBase = 50 * time.Millisecond
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Collector{cfg: cfg}, nil
}

// Run watches every resource, builds the graph from a full list and collects until ctx is
// done. Workers start once the list is complete, so every decision sees the whole graph. It
// returns once its goroutines have; the graph is dropped then. Run may be called again (each
// leadership term calls it anew, which is a full resync); each run starts without the absent
// owners the last one remembered (a restored snapshot brings uids back).
func (c *Collector) Run(ctx context.Context) error {
	c.absent.reset()
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](c.cfg.BackoffBase, c.cfg.BackoffMax),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: c.cfg.Clock},
	)
	c.mu.Lock()
	c.queue = q
	c.mu.Unlock()
	synced := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { c.inform(ctx, q, synced) })
	for range c.cfg.Workers {
		wg.Go(func() {
			select {
			case <-synced:
			case <-ctx.Done():
				return
			}
			for c.processNext(ctx, q) {
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
	c.mu.Lock()
	c.graph, c.queue = nil, nil
	c.mu.Unlock()
	return nil
}

// enqueue asks for uids to be looked at (nothing while not running).
func (c *Collector) enqueue(uids ...string) {
	c.mu.Lock()
	q := c.queue
	c.mu.Unlock()
	if q == nil {
		return
	}
	for _, uid := range uids {
		q.Add(uid)
	}
}

// inform is the collector's informer: one watch of every resource with its initial list,
// started again with a fresh graph (and every dependent looked at again) when it falls behind.
func (c *Collector) inform(ctx context.Context, q workqueue.TypedRateLimitingInterface[string], synced chan struct{}) {
	once := sync.OnceFunc(func() { close(synced) })
	defer once()
	for ctx.Err() == nil {
		w, err := c.cfg.Client.Watch(ctx, cache.WatchOptions{SendInitialEvents: true})
		if err != nil {
			c.cfg.Logger.Warn("garbage collector watch", "err", err)
			return
		}
		g := newGraph(c.absent.add)
		c.mu.Lock()
		c.graph = g
		c.mu.Unlock()
		initial := true
		for ev := range w.Events() {
			if ev.Type == cache.Bookmark {
				if initial {
					initial = false
					once()
				}
				continue
			}
			c.mu.Lock()
			uids := g.apply(ev, initial)
			c.mu.Unlock()
			for _, uid := range uids {
				q.Add(uid)
			}
		}
		if ctx.Err() != nil || errors.Is(w.Err(), cache.ErrClosed) {
			return
		}
		c.cfg.Logger.Info("garbage collector re-listing", "reason", w.Err())
	}
}

// processNext looks at one uid. A conflict (the object changed meanwhile) looks again at once;
// another failure backs off.
func (c *Collector) processNext(ctx context.Context, q workqueue.TypedRateLimitingInterface[string]) bool {
	uid, shutdown := q.Get()
	if shutdown {
		return false
	}
	defer q.Done(uid)
	err := c.process(ctx, uid)
	switch {
	case err == nil, isNotFound(err):
		q.Forget(uid)
	case isConflict(err):
		q.Add(uid)
	case errors.Is(err, errKindNotServed):
		c.cfg.Logger.Debug("garbage collector", "uid", uid, "err", err)
		q.AddRateLimited(uid)
	default:
		c.cfg.Logger.Warn("garbage collector", "uid", uid, "err", err)
		q.AddRateLimited(uid)
	}
	return true
}

// process does what the live object at uid needs: an owner being deleted in the foreground
// waits for its blocking dependents (deleting them), one being deleted with orphan loses its
// dependents' references; an object that is not being deleted and names owners is deleted
// when they are all gone.
func (c *Collector) process(ctx context.Context, uid string) error {
	c.mu.Lock()
	var key cache.Key
	ok := false
	if c.graph != nil {
		key, ok = c.graph.keyOf(uid)
	}
	c.mu.Unlock()
	if !ok {
		return nil
	}
	obj, err := c.cfg.Client.Get(ctx, key)
	if err != nil {
		return err
	}
	if obj.UID() != uid {
		return nil // another object now has the name; the old one's deletion was seen
	}
	if obj.Deleting() {
		orphan, foreground := finalizersOf(obj.Finalizers())
		if orphan {
			if obj, err = c.orphanDependents(ctx, obj); err != nil || obj == nil {
				return err
			}
		}
		if foreground {
			return c.deleteDependents(ctx, obj)
		}
		return nil
	}
	owners := ownersOf(obj.Raw())
	if len(owners) == 0 {
		return nil
	}
	return c.attemptToDelete(ctx, obj, owners)
}

func isNotFound(err error) bool {
	return errors.Is(err, cache.ErrNotFound) || apierrors.IsNotFound(err)
}
func isConflict(err error) bool {
	return errors.Is(err, cache.ErrConflict) || apierrors.IsConflict(err)
}
