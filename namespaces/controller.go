package namespaces

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/reconciler"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Client is how the controller reads and writes: the in-process API client (registry.Client),
// so its writes pass the write path's rules like a client's.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
	// Counts says which resources hold objects in which namespace.
	Counts() []cache.ResourceCount
	DeletePropagating(ctx context.Context, key cache.Key, pre cache.Preconditions, policy metav1.DeletionPropagation) (*cache.Object, bool, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	// Finalize writes a Namespace's spec.finalizers through namespaces/finalize.
	Finalize(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
}

// Name is the controller's name in metrics and logs.
const Name = "namespace"

// Config configures a Controller. Client is required; zero values are documented defaults.
type Config struct {
	Client Client
	// Tuning is the queue's (workers, backoff, metrics, log, clock; the clock also stamps the
	// conditions). MaxRetries is ignored: a namespace is never given up on, as in Kubernetes.
	Tuning reconciler.Tuning
	// Recheck is how long a namespace whose content is held by finalizers waits before it is
	// looked at again when nothing in it changed (its watch sees every change). Zero means
	// 10 s.
	Recheck time.Duration
}

// Controller finishes Terminating namespaces. Create it with New; Run it while leading.
type Controller struct {
	cfg  Config
	ctrl *reconciler.Controller

	// mu guards watching and run.
	mu sync.Mutex
	// watching holds a watch per namespace waiting on its content, ended by its cancel.
	watching map[string]context.CancelFunc
	// run is the context of the current Run (nil while not running): the watches' parent.
	run context.Context
	// watches are the watch goroutines, which Run waits for.
	watches sync.WaitGroup
}

// New makes a Controller over cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("namespaces: Client is required")
	}
	if cfg.Recheck <= 0 {
		cfg.Recheck = 10 * time.Second
	}
	t := cfg.Tuning
	t.MaxRetries = 1 << 30
	c := &Controller{cfg: cfg, watching: map[string]context.CancelFunc{}}
	ctrl, err := reconciler.New(reconciler.Config{Store: cfg.Client, Resource: kinds.Namespaces, Reconciler: c, Name: Name, Tuning: t})
	if err != nil {
		return nil, err
	}
	c.ctrl = ctrl
	return c, nil
}

// Run finishes Terminating namespaces until ctx is done, starting from a full list of them. It
// returns once its workers and watches have. It may be called again after it returns.
func (c *Controller) Run(ctx context.Context) error {
	c.mu.Lock()
	c.run = ctx
	c.mu.Unlock()
	err := c.ctrl.Run(ctx)
	c.mu.Lock()
	c.run = nil
	for name, cancel := range c.watching {
		cancel()
		delete(c.watching, name)
	}
	c.mu.Unlock()
	c.watches.Wait()
	return err
}

// Reconcile is one pass over the namespace at key (reconciler.Reconciler): while its content
// is held, its namespace is watched and looked at again after Recheck.
func (c *Controller) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	done, err := c.Sync(ctx, key.Name)
	if err != nil || done {
		c.unwatch(key.Name)
		return reconciler.Result{}, err
	}
	c.watch(key.Name)
	return reconciler.Result{RequeueAfter: c.cfg.Recheck}, nil
}

// watch starts watching namespace name's content unless it is watched; every event there
// enqueues the namespace, and so does the start of the watch (what changed between the pass
// that asked for it and its start is not missed).
func (c *Controller) watch(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.watching[name]; ok || c.run == nil {
		return
	}
	ctx, cancel := context.WithCancel(c.run)
	c.watching[name] = cancel
	c.watches.Go(func() {
		defer cancel()
		key := cache.Key{Group: kinds.Namespaces.Group, Resource: kinds.Namespaces.Resource, Name: name}
		for ctx.Err() == nil {
			w, err := c.cfg.Client.Watch(ctx, cache.WatchOptions{Namespace: name})
			if err != nil {
				return // the Recheck requeue still comes
			}
			c.ctrl.Enqueue(key)
			for range w.Events() {
				c.ctrl.Enqueue(key)
			}
			w.Stop()
		}
	})
}

// unwatch ends the watch of namespace name, if any.
func (c *Controller) unwatch(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cancel, ok := c.watching[name]; ok {
		cancel()
		delete(c.watching, name)
	}
}
