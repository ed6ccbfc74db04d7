package faults

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/metrics"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// Client is how the engine reads Faults and writes their status: the in-process API client
// (registry.Client), so nothing it stores could not have been stored by a client.
type Client interface {
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
}

// Config configures an Engine. Client is required.
type Config struct {
	Client Client
	// Clock decides expiry and stamps lastInjectionTime. Nil means the real clock.
	Clock clock.WithTicker
	// Metrics counts faults_injected_total; nil counts nothing.
	Metrics *metrics.Registry
	// Logger nil means slog.Default().
	Logger *slog.Logger
	// Rand returns a number in [0, 1) for probability rolls. Nil means math/rand/v2.
	Rand func() float64
}

// Request is one client request as the server parsed it, what Faults are matched against.
type Request struct {
	// Verb is the request's verb as RBAC names it (VerbGet, VerbList, VerbWatch, ...).
	Verb string
	// Group and Resource are the request's resource. Resource is empty for a request over
	// several resources (the SSE stream), which lists them in Resources (nil: every resource).
	Group, Resource string
	Resources       []cache.GroupResource
	Subresource     string
	Namespace, Name string
	UserAgent       string
}

// WatchAction is what a Fault does to a watch stream it lets through.
type WatchAction struct {
	// CloseAfter is how long after it started the stream ends.
	CloseAfter time.Duration
	// Expire sends an ERROR event with a 410 Expired Status before the end.
	Expire bool
}

// Injection is what the server does to one request: wait Delay, then answer Err instead of
// carrying the request out, or for a watch apply Watch to the stream. An Injection with Watch
// set must be ended with WatchDone.
type Injection struct {
	// Fault names the Fault that injected it.
	Fault string
	Delay time.Duration
	// Err, when set, is the *apierrors.StatusError to answer.
	Err error
	// Watch, when set, is applied to the watch stream.
	Watch *WatchAction

	e       *Engine
	r       *rule
	pending bool // counted at WatchDone, not yet
	done    atomic.Bool
}

// Engine applies Faults: it watches them in the store, matches client requests against the
// active ones and counts what it injected in their status. Create it with New, run it with Run.
type Engine struct {
	cfg Config
	log *slog.Logger

	// rules are the Faults being applied, sorted by name; replaced whole on every change.
	rules atomic.Pointer[[]*rule]
	// wake (capacity 1) tells the status writer that a count or phase may need writing.
	wake chan struct{}

	// mu guards counters: the counter of every Fault seen, by uid, kept across its updates.
	mu       sync.Mutex
	counters map[string]*counter
}

// New validates cfg.
func New(cfg Config) (*Engine, error) {
	if cfg.Client == nil {
		return nil, errors.New("faults: Client is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, wake: make(chan struct{}, 1), counters: map[string]*counter{}}
	e.rules.Store(&[]*rule{})
	return e, nil
}

// Any reports whether any Fault exists (one atomic load), so a caller can skip describing a
// request when none could match it.
func (e *Engine) Any() bool { return len(*e.rules.Load()) > 0 }

// Inject decides the fault of req: nil (the common case, one atomic load when no Fault
// exists) or the Injection of the first Fault, by name, that matches req and fires (its
// every, probability, count and expiry allow). At most one Fault applies to a request.
// Requests to Faults themselves are never faulted. Safe for concurrent use.
func (e *Engine) Inject(req Request) *Injection {
	rules := *e.rules.Load()
	if len(rules) == 0 || req.Group == Resource.Group && req.Resource == Resource.Resource {
		return nil
	}
	var now time.Time
	for _, r := range rules {
		if !r.matches(req) {
			continue
		}
		if now.IsZero() {
			now = e.cfg.Clock.Now()
		}
		if inj := e.fire(r, req, now); inj != nil {
			return inj
		}
	}
	return nil
}

// fire decides whether r, which matches req, injects into it, and counts it.
func (e *Engine) fire(r *rule, req Request, now time.Time) *Injection {
	if !r.expiry.IsZero() && !now.Before(r.expiry) {
		return nil
	}
	watch := r.status == 0 && req.Verb == VerbWatch && r.watch != nil
	// Without a delay, a watch fault happens (and is counted) when the stream is closed.
	pending := watch && r.delay == 0
	c := r.c
	c.mu.Lock()
	c.seen++
	fires := c.seen%r.every == 0 && (r.probability >= 1 || e.cfg.Rand() < r.probability) &&
		(r.count == 0 || c.injected+c.reserved < r.count)
	if fires {
		if pending {
			c.reserved++
		} else {
			c.injected++
			c.last = now
		}
	}
	c.mu.Unlock()
	if !fires {
		return nil
	}
	inj := &Injection{Fault: r.name, Delay: r.delay, e: e, r: r, pending: pending}
	switch {
	case r.status != 0:
		inj.Err = statusError(r, req)
	case watch:
		inj.Watch = r.watch
	}
	if !pending {
		e.counted(r)
	}
	return inj
}

// WatchDone ends a watch injection: effected says the stream was closed by the fault (it is
// then counted), false that it ended otherwise (the client left first). Idempotent; a no-op
// on injections without Watch.
func (i *Injection) WatchDone(effected bool) {
	if i == nil || i.Watch == nil || !i.done.CompareAndSwap(false, true) {
		return
	}
	if !i.pending {
		return
	}
	c := i.r.c
	c.mu.Lock()
	c.reserved--
	if effected {
		c.injected++
		c.last = i.e.cfg.Clock.Now()
	}
	c.mu.Unlock()
	if effected {
		i.e.counted(i.r)
	}
}

// ExpiredStatus is the 410 Status sent in the ERROR event of a watch the fault expires.
func (i *Injection) ExpiredStatus() error {
	return apierrors.NewResourceExpired(fmt.Sprintf("the watch expired: %s; relist", injectedBy(i.Fault)))
}

// counted records one injection of r: the metric now, the status soon.
func (e *Engine) counted(r *rule) {
	e.cfg.Metrics.FaultInjected(r.name)
	e.notify()
}

func (e *Engine) notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// injectedBy is how every injected error says where it came from.
func injectedBy(name string) string {
	return fmt.Sprintf("injected by Fault %q (faults.opemu.dev): the request was not carried out", name)
}

// statusError is the error status r answers req with, as kube-apiserver words that status.
func statusError(r *rule, req Request) error {
	msg := injectedBy(r.name)
	if r.message != "" {
		msg += ": " + r.message
	}
	gr := schema.GroupResource{Group: req.Group, Resource: req.Resource}
	var se *apierrors.StatusError
	switch r.status {
	case 409:
		se = apierrors.NewConflict(gr, req.Name, errors.New(msg))
	case 410:
		se = apierrors.NewResourceExpired(msg)
	case 429:
		se = apierrors.NewTooManyRequests(msg, r.retryAfter)
	case 500:
		se = apierrors.NewInternalError(errors.New(msg))
	case 503:
		se = apierrors.NewServiceUnavailable(msg)
	case 504:
		se = apierrors.NewTimeoutError(msg, r.retryAfter)
	}
	if r.retryAfter > 0 {
		if se.ErrStatus.Details == nil {
			se.ErrStatus.Details = &metav1.StatusDetails{}
		}
		se.ErrStatus.Details.RetryAfterSeconds = int32(r.retryAfter)
	}
	return se
}

// Run watches Faults and keeps their rules and status current until ctx is done. It returns
// once its goroutines have exited.
func (e *Engine) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() { e.writeStatus(ctx) })
	e.inform(ctx)
	wg.Wait()
	return nil
}

// inform lists and watches Faults (SendInitialEvents), re-listing when the watch ends early,
// and publishes their rules on every change.
func (e *Engine) inform(ctx context.Context) {
	err := cache.Mirror(ctx, e.cfg.Client, cache.WatchOptions{Resources: []cache.GroupResource{Resource}}, e.publish,
		func(reason error) { e.log.Info("fault watch re-listing", "reason", reason) })
	if err != nil {
		e.log.Warn("fault watch", "err", err)
		return
	}
	e.publish(nil)
}

// publish replaces the rules by those of objs, keeping each Fault's counter (by uid).
func (e *Engine) publish(objs map[cache.Key]*cache.Object) {
	rules := make([]*rule, 0, len(objs))
	e.mu.Lock()
	uids := map[string]bool{}
	for _, o := range objs {
		r, st := newRule(o)
		c := e.counters[r.uid]
		if c == nil {
			c = &counter{injected: st.Injected}
			if t, err := time.Parse(time.RFC3339, st.LastInjectionTime); err == nil {
				c.last = t
			}
			e.counters[r.uid] = c
		}
		r.c = c
		uids[r.uid] = true
		rules = append(rules, r)
	}
	for uid := range e.counters {
		if !uids[uid] {
			delete(e.counters, uid)
		}
	}
	e.mu.Unlock()
	slices.SortFunc(rules, func(a, b *rule) int { return strings.Compare(a.name, b.name) })
	e.rules.Store(&rules)
	e.notify()
}
