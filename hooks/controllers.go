package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/reconciler"
	"k8s.io/utils/clock"
)

// Client is how the reconcile hooks read and write: the in-process API client
// (registry.Client), so what they store passes the checks a client's write passes.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Apply(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Delete(ctx context.Context, key cache.Key, pre cache.Preconditions) (*cache.Object, bool, error)
}

// EventRecorder records Events (*events.Recorder implements it).
type EventRecorder interface {
	Record(ctx context.Context, ev events.Event)
}

// Config configures a Manager. Clients and Kinds are required.
type Config struct {
	// Clients returns the client a component writes through, with manager as its field
	// manager: each Controller writes as its own name, the Manager as "opemu-controllers".
	Clients func(manager string) Client
	Kinds   *kinds.Registry
	// Events may be nil.
	Events EventRecorder
	// Reserved are names a Controller may not take (the built-in controllers').
	Reserved []string
	// Tuning is every Controller's queue settings (its ResyncInterval is the default a
	// Controller's spec.resyncPeriodSeconds overrides) and the Manager's own metrics, log and
	// clock (Clock also times conditions). Zero values are reconciler.Tuning's defaults.
	reconciler.Tuning
}

// Manager runs a reconciler.Controller for each Controller object (SPEC §15): Run keeps them
// current with the Controller objects (on every replica, so pause state and history survive
// leadership), Lead runs their queues while this replica leads and writes the Controllers'
// status. Safe for concurrent use.
type Manager struct {
	cfg    Config
	log    *slog.Logger
	client Client // the Manager's own (Controller objects and their status)
	// wake (capacity 1) asks the status writer to look again.
	wake chan struct{}
	// conditionFields caches, per kind, the condition fields its schema keeps.
	conditionFields sync.Map // *kinds.Kind → map[string]bool (nil: no conditions)

	// mu guards entries, objects and leading.
	mu      sync.Mutex
	entries map[string]*entry
	objects map[string]*cache.Object // the Controller objects, by name
	leading context.Context          // set while Lead runs
}

// entry is one Controller object's controller.
type entry struct {
	name string
	uid  string
	gen  int64
	rec  *hookReconciler
	ctrl *reconciler.Controller // nil while the spec is invalid
	// ctrlSpec is the spec ctrl was made for (its resource and resync).
	ctrlSpec *controllerSpec
	// stop and done belong to the run of ctrl while leading (nil otherwise).
	stop context.CancelFunc
	done chan struct{}
}

// NewManager validates cfg.
func NewManager(cfg Config) (*Manager, error) {
	if cfg.Clients == nil || cfg.Kinds == nil {
		return nil, errors.New("hooks: Clients and Kinds are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Manager{
		cfg: cfg, log: cfg.Logger, client: cfg.Clients("opemu-controllers"), wake: make(chan struct{}, 1),
		entries: map[string]*entry{}, objects: map[string]*cache.Object{},
	}, nil
}

// Run lists and watches the Controller objects and keeps one controller per object until ctx
// is done, re-listing when its watch falls behind. It returns once every controller it
// started has stopped.
func (m *Manager) Run(ctx context.Context) error {
	defer m.apply(nil)
	err := cache.Mirror(ctx, m.client, cache.WatchOptions{Resources: []cache.GroupResource{Resource}}, m.apply,
		func(reason error) { m.log.Info("controller watch re-listing", "reason", reason) })
	if err != nil {
		m.log.Warn("controller watch", "err", err)
	}
	return nil
}

// apply makes the entries match the Controller objects objs (by name): a new object gets a
// controller, a deleted one's stops, a changed one's takes the new spec at once (its queue is
// restarted, which reconciles every object again). The leader releases the finalizer of a
// deleted Controller from its objects: nothing else would remove it. objs nil (shutdown) stops
// every controller and releases nothing.
func (m *Manager) apply(mirror map[cache.Key]*cache.Object) {
	var objs map[string]*cache.Object // by name: Controllers are cluster-scoped
	if mirror != nil {
		objs = make(map[string]*cache.Object, len(mirror))
		for k, o := range mirror {
			objs[k.Name] = o
		}
	}
	var stops []func()
	type gone struct {
		name string
		gr   cache.GroupResource
	}
	var released []gone
	m.mu.Lock()
	m.objects = make(map[string]*cache.Object, len(objs))
	for name, o := range objs {
		m.objects[name] = o
	}
	for name, e := range m.entries {
		if o, ok := objs[name]; !ok || o.UID() != e.uid {
			stops = append(stops, m.stopLocked(e))
			delete(m.entries, name)
			if sp := e.rec.spec.Load(); !ok && objs != nil && sp.invalid == nil {
				released = append(released, gone{name, sp.resource})
			}
		}
	}
	for name, o := range objs {
		e := m.entries[name]
		if e != nil && e.gen == o.Generation() {
			continue
		}
		if e != nil {
			stops = append(stops, m.stopLocked(e))
		}
		m.entries[name] = m.newEntry(o, e)
	}
	m.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	// Started after the old runs stopped: two queues never reconcile one object at once.
	m.mu.Lock()
	leading := m.leading
	if leading != nil {
		for _, e := range m.entries {
			m.startLocked(e)
		}
	}
	m.mu.Unlock()
	m.notify()
	if leading != nil {
		for _, g := range released {
			m.releaseFinalizers(leading, g.name, g.gr)
		}
	}
}

// releaseFinalizers removes the finalizer of the deleted Controller name from the objects of
// gr, so that none waits forever on a hook nobody calls any more.
func (m *Manager) releaseFinalizers(ctx context.Context, name string, gr cache.GroupResource) {
	fin := finalizerName(name)
	list, err := m.client.List(ctx, gr)
	if err != nil {
		return
	}
	for _, o := range list.Items {
		for attempt := 0; attempt < 5 && slices.Contains(o.Finalizers(), fin); attempt++ {
			doc, err := o.Decode()
			if err != nil {
				break
			}
			md, _ := doc["metadata"].(map[string]any)
			fins := make([]any, 0, len(o.Finalizers()))
			for _, f := range o.Finalizers() {
				if f != fin {
					fins = append(fins, f)
				}
			}
			md["finalizers"] = fins
			md["resourceVersion"] = strconv.FormatUint(o.ResourceVersion(), 10)
			if _, err = m.client.Update(ctx, o.Key(), doc); err == nil || !reconciler.IsConflict(err) {
				if err != nil && !errors.Is(err, cache.ErrNotFound) {
					m.log.Warn("releasing a deleted Controller's finalizer", "controller", name, "object", o.Key().String(), "err", err)
				}
				break
			}
			if o, err = m.client.Get(ctx, o.Key()); err != nil {
				break
			}
		}
	}
}

// newEntry makes the controller of Controller object o, keeping what old (the entry of an
// earlier generation of o, or nil) had: its reconciler (history), its pause state, and its
// controller when the resource and resync are unchanged.
func (m *Manager) newEntry(o *cache.Object, old *entry) *entry {
	name := o.Key().Name
	sp := m.parseSpec(o)
	e := &entry{name: name, uid: o.UID(), gen: o.Generation()}
	if old != nil {
		e.rec = old.rec
		if old.rec.spec.Load().client != nil {
			defer old.rec.spec.Load().client.CloseIdleConnections()
		}
	} else {
		e.rec = &hookReconciler{m: m, name: name, client: m.cfg.Clients(name), failures: map[cache.Key]int{}, phases: map[cache.Key]string{}}
	}
	e.rec.spec.Store(sp)
	if sp.invalid != nil {
		return e
	}
	if old != nil && old.ctrl != nil {
		osp := old.ctrlSpec
		if osp.resource == sp.resource && osp.resync == sp.resync {
			e.ctrl, e.ctrlSpec = old.ctrl, sp
			return e
		}
	}
	resync := m.cfg.ResyncInterval
	if sp.resync >= 0 {
		resync = sp.resync
	}
	tuning := m.cfg.Tuning
	tuning.ResyncInterval = resync
	ctrl, err := reconciler.New(reconciler.Config{Store: m.client, Resource: sp.resource, Reconciler: e.rec, Name: name, Tuning: tuning})
	if err != nil {
		sp.invalid = err
		return e
	}
	if old != nil && old.ctrl != nil && old.ctrl.Paused() {
		ctrl.Pause()
	}
	e.ctrl, e.ctrlSpec = ctrl, sp
	return e
}

// startLocked runs e's controller (and its children's watch) while leading, unless it runs.
func (m *Manager) startLocked(e *entry) {
	if e.ctrl == nil || e.stop != nil {
		return
	}
	ctx, stop := context.WithCancel(m.leading)
	done := make(chan struct{})
	e.stop, e.done = stop, done
	ctrl, rec := e.ctrl, e.rec
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		wg.Go(func() { m.watchChildren(ctx, ctrl, rec) })
		_ = ctrl.Run(ctx)
		wg.Wait()
	}()
}

// stopLocked takes e's run from it and returns the function that stops it and waits for it
// (to be called without m.mu: the workers finish their item first).
func (m *Manager) stopLocked(e *entry) func() {
	stop, done := e.stop, e.done
	e.stop, e.done = nil, nil
	return func() {
		if stop != nil {
			stop()
			<-done
		}
	}
}

// Lead runs every controller's queue until ctx is done (while this replica leads), and keeps
// the Controllers' status current. It returns once every controller has stopped.
func (m *Manager) Lead(ctx context.Context) error {
	m.mu.Lock()
	m.leading = ctx
	for _, e := range m.entries {
		m.startLocked(e)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { m.writeStatus(ctx) })
	<-ctx.Done()
	var stops []func()
	m.mu.Lock()
	m.leading = nil
	for _, e := range m.entries {
		stops = append(stops, m.stopLocked(e))
	}
	m.mu.Unlock()
	for _, stop := range stops {
		stop()
	}
	wg.Wait()
	return nil
}

func (m *Manager) notify() {
	select {
	case m.wake <- struct{}{}:
	default:
	}
}

// Controllers returns the controllers of the Controller objects (those whose spec is valid).
func (m *Manager) Controllers() []*reconciler.Controller {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*reconciler.Controller, 0, len(m.entries))
	for _, e := range m.entries {
		if e.ctrl != nil {
			out = append(out, e.ctrl)
		}
	}
	return out
}

// reconciling returns the entries whose controller reconciles gr, by name.
func (m *Manager) reconciling(gr cache.GroupResource) []*entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*entry
	for _, e := range m.entries {
		if e.ctrl != nil && e.ctrl.Resource() == gr {
			out = append(out, e)
		}
	}
	slices.SortFunc(out, func(a, b *entry) int { return strings.Compare(a.name, b.name) })
	return out
}

// History returns the recent reconciles of key by every Controller reconciling its resource,
// oldest first, and whether any does.
func (m *Manager) History(key cache.Key) ([]Attempt, bool) {
	es := m.reconciling(key.GroupResource())
	if len(es) == 0 {
		return nil, false
	}
	out := []Attempt{}
	for _, e := range es {
		out = append(out, e.rec.History(key)...)
	}
	slices.SortStableFunc(out, func(a, b Attempt) int { return strings.Compare(a.StartTime, b.StartTime) })
	return out, true
}

// Enqueue asks every Controller reconciling key's resource for an immediate reconcile of key;
// false when none runs here (this replica does not lead) or none reconciles the resource.
func (m *Manager) Enqueue(key cache.Key) bool {
	queued := false
	for _, e := range m.reconciling(key.GroupResource()) {
		queued = e.ctrl.Enqueue(key) || queued
	}
	return queued
}

// Reconciles reports whether a Controller reconciles gr.
func (m *Manager) Reconciles(gr cache.GroupResource) bool { return len(m.reconciling(gr)) > 0 }

// PhaseCounts is resource_phase_count of the hooked kinds: objects per kind and the
// status.phase their last reconcile left.
func (m *Manager) PhaseCounts() []metrics.Count {
	m.mu.Lock()
	es := make([]*entry, 0, len(m.entries))
	for _, e := range m.entries {
		if e.ctrl != nil {
			es = append(es, e)
		}
	}
	m.mu.Unlock()
	var out []metrics.Count
	for _, e := range es {
		gr := e.ctrl.Resource()
		kind := gr.String()
		if k, ok := m.cfg.Kinds.Resource(gr); ok {
			kind = k.Kind
		}
		for phase, n := range e.rec.phaseCounts() {
			out = append(out, metrics.Count{Labels: [2]string{kind, phase}, Value: float64(n)})
		}
	}
	return out
}

// controllerSpec is a Controller object's spec, checked.
type controllerSpec struct {
	resource cache.GroupResource
	version  string
	url      string
	timeout  time.Duration
	client   *http.Client
	children []childRef
	finalize bool
	// resync is spec.resyncPeriodSeconds; negative means the default.
	resync time.Duration
	// invalid, when set, says why the Controller cannot run.
	invalid error
}

// parseSpec reads a Controller object's spec. A spec that cannot be used is kept with invalid
// set (and no controller runs for it); its status says why.
func (m *Manager) parseSpec(o *cache.Object) *controllerSpec {
	var doc struct {
		Spec struct {
			Resource struct{ Group, Version, Plural string } `json:"resource"`
			Hook     struct {
				URL            string `json:"url"`
				TimeoutSeconds int    `json:"timeoutSeconds"`
				CABundle       []byte `json:"caBundle"`
			} `json:"hook"`
			Children            []childRef `json:"children"`
			Finalize            bool       `json:"finalize"`
			ResyncPeriodSeconds *int64     `json:"resyncPeriodSeconds"`
		} `json:"spec"`
	}
	sp := &controllerSpec{resync: -1, timeout: 10 * time.Second}
	if err := json.Unmarshal(o.Raw(), &doc); err != nil {
		sp.invalid = fmt.Errorf("the spec does not decode: %v", err)
		return sp
	}
	s := doc.Spec
	sp.resource = cache.GroupResource{Group: s.Resource.Group, Resource: s.Resource.Plural}
	sp.version, sp.url, sp.children, sp.finalize = s.Resource.Version, s.Hook.URL, s.Children, s.Finalize
	if s.Hook.TimeoutSeconds > 0 {
		sp.timeout = time.Duration(s.Hook.TimeoutSeconds) * time.Second
	}
	if s.ResyncPeriodSeconds != nil {
		sp.resync = time.Duration(*s.ResyncPeriodSeconds) * time.Second
	}
	name := o.Key().Name
	switch {
	case slices.Contains(m.cfg.Reserved, name):
		sp.invalid = fmt.Errorf("the name %q is taken by opemu's built-in controller; name this Controller otherwise", name)
	case sp.resource == Resource:
		sp.invalid = errors.New("a Controller cannot reconcile Controllers")
	}
	if sp.invalid != nil {
		return sp
	}
	u, err := url.Parse(sp.url)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		sp.invalid = fmt.Errorf("spec.hook.url %q is not an http or https URL", sp.url)
		return sp
	}
	if sp.client, err = newClient(s.Hook.CABundle, 4); err != nil {
		sp.invalid = fmt.Errorf("spec.hook.caBundle %w", err)
	}
	return sp
}
