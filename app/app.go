package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/faults"
	"github.com/opemu/opemu/gc"
	"github.com/opemu/opemu/hooks"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/leader"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/server"
	"github.com/opemu/opemu/workloads"
)

// Run listens on cfg.Addr and serves until ctx is done (see App.Run). The first log line is
// "listening addr=<host:port>", with the real port when a free one was asked for.
func Run(ctx context.Context, cfg Config) error {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	logger(cfg).Info("listening", "addr", ln.Addr().String())
	a, err := New(cfg)
	if err != nil {
		_ = ln.Close()
		return err
	}
	return a.Run(ctx, ln)
}

func logger(cfg Config) *slog.Logger {
	if cfg.Logger == nil {
		return slog.Default()
	}
	return cfg.Logger
}

// Stores (Config.Store).
const (
	StoreMemory = "memory"
	StoreEtcd   = "etcd"
)

// App is one wired server. Create it with New, serve it with Run.
type App struct {
	cfg      Config
	log      *slog.Logger
	clock    clock.WithTicker
	store    cache.Interface
	etcd     sharedStore // the store when it is etcd's
	closeAll func()      // closes the store (and etcd's client)
	crdsAt   uint64      // the version the stored CRDs were loaded at (etcd)
	crds     *crd.Registry
	reg      *registry.Store
	recorder *events.Recorder
	ctrl     *reconciler.Controller // the Application controller; nil when the controllers are off
	// ctrls are every controller: the Application's and the simulated workloads'.
	ctrls []*reconciler.Controller
	// collector is the garbage collector; nil when the controllers are off.
	collector *gc.Collector
	elector   *leader.Elector // nil when election is off
	faults    *faults.Engine
	metrics   *metrics.Registry
	hooks     *hooks.Manager   // the Controllers' controllers; nil when the controller is off
	webhooks  *hooks.Admission // the admission webhooks configured in the API
	// server is the HTTP server's configuration; Run completes it (tokens depend on the
	// listener) and serves it.
	server server.Config
}

// New wires a server: the store, the served kinds (the built-ins, the Application, Fault and
// Controller CRDs), admission (built-in, then the webhooks configured in the API), the write
// path, the event recorder, the fault engine, the controllers (the Application's and the
// Controllers' hooks) and the elector when asked for. Nothing runs until Run, which adds the
// HTTP server.
func New(cfg Config) (*App, error) {
	log := logger(cfg)
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	identity := cfg.PodName
	if identity == "" {
		identity = "opemu"
	}
	a := &App{cfg: cfg, log: log, clock: clk, metrics: metrics.New()}
	// The Event kind carries its rules: its TTL (an etcd lease on etcd) and, over the in-memory
	// store only, EVENT_LIMIT (on etcd the lease alone bounds Events, as in kube-apiserver).
	eventKind := events.KindConfig{TTL: cfg.EventTTL, Clock: clk}
	if cfg.Store != StoreEtcd {
		eventKind.Limit = cmp.Or(cfg.EventLimit, events.DefaultLimit)
	}
	served := kinds.New(events.Kind(eventKind))
	if err := a.openStore(served, identity); err != nil {
		return nil, err
	}
	// From here on a failure must not leave the etcd client and feed running.
	ok := false
	defer func() {
		if !ok {
			a.closeStore()
		}
	}()
	crds, err := crd.New(crd.Config{Kinds: served, Drop: a.store.DropResource})
	if err != nil {
		return nil, err
	}
	a.crds = crds
	if err := served.Add(crds.Kind()); err != nil {
		return nil, err
	}
	if err := crds.AddBuiltIn(application.CRD()); err != nil {
		return nil, err
	}
	if err := crds.AddBuiltIn(faults.CRD()); err != nil {
		return nil, err
	}
	if err := crds.AddBuiltIn(hooks.CRD()); err != nil {
		return nil, err
	}
	a.metrics.SetResourceCounts(resourceCounts(a.store, served))
	admission, err := application.NewChain(application.ChainConfig{
		AllowedRegistries: cfg.AllowedRegistries,
		BlockedImages:     cfg.BlockedImages,
		Recorder:          a.metrics,
	})
	if err != nil {
		return nil, err
	}

	// The write path runs the built-in handlers, then the admission webhooks configured in the
	// API; /mutate and /validate serve the built-in ones only.
	writeAdmission := *admission
	// The write path records Events through the recorder, which writes them through the write
	// path: the write path makes it with the client it writes with.
	var readOnly func(cache.Key) bool
	evcfg := events.Config{Host: identity, TTL: cfg.EventTTL, Metrics: a.metrics, Logger: log, Clock: clk}
	if a.etcd != nil {
		// An Event written to etcd costs a round trip: the action it records does not wait for it.
		evcfg.Queue = 10000
	}
	reg, err := registry.New(registry.Config{
		Storage: a.store, Kinds: served, Admission: &writeAdmission, Clock: clk,
		Events: func(c *registry.Client) registry.EventRecorder {
			evcfg.Client = c
			a.recorder = events.New(evcfg)
			return a.recorder
		},
		ReadOnly: func(k cache.Key) bool { return readOnly != nil && readOnly(k) },
		MaxBody:  cfg.MaxBody,
	})
	if err != nil {
		return nil, err
	}
	a.reg = reg
	if a.webhooks, err = hooks.NewAdmission(hooks.AdmissionConfig{Client: reg.Client("opemu-webhooks"), Kinds: served, Metrics: a.metrics, Logger: log}); err != nil {
		return nil, err
	}
	writeAdmission.Configured = a.webhooks

	if a.faults, err = faults.New(faults.Config{Client: reg.Client("opemu-faults"), Clock: clk, Metrics: a.metrics, Logger: log}); err != nil {
		return nil, err
	}
	// A manual clock (CLOCK=manual) is moved by POST /clock/advance. Leader election keeps
	// the real clock: client-go's elector cannot be given another (v0.37), and the mirror of
	// the file lease is paced with it.
	manual, _ := clk.(server.ManualClock)
	electionClock := clk
	if manual != nil {
		electionClock = clock.RealClock{}
	}

	var routes server.Controller
	var loopRoutes server.Loop
	if cfg.EnableController {
		app := application.New(application.Config{Client: reg.Client(application.Source), Events: a.recorder, RolloutStep: cfg.RolloutStep, Clock: clk})
		a.ctrl, err = reconciler.New(reconciler.Config{
			Store: a.store, Resource: application.Resource, Reconciler: app, Name: "application",
			Workers: cfg.WorkerCount, ResyncInterval: cfg.ReconcileInterval, MaxRetries: cfg.MaxRetries,
			BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, QPS: cfg.QueueQPS, Burst: cfg.QueueBurst,
			Metrics: a.metrics, Logger: log, Clock: clk,
		})
		if err != nil {
			return nil, err
		}
		a.hooks, err = hooks.NewManager(hooks.Config{
			Clients: func(manager string) hooks.Client { return reg.Client(manager) },
			Kinds:   served, Events: a.recorder, Reserved: []string{a.ctrl.Name()},
			Workers: cfg.WorkerCount, ResyncInterval: cfg.ReconcileInterval, MaxRetries: cfg.MaxRetries,
			BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, QPS: cfg.QueueQPS, Burst: cfg.QueueBurst,
			Metrics: a.metrics, Logger: log, Clock: clk,
		})
		if err != nil {
			return nil, err
		}
		a.metrics.SetPhaseCounts(func() []metrics.Count {
			var out []metrics.Count
			for phase, n := range a.ctrl.PhaseCounts() {
				out = append(out, metrics.Count{Labels: [2]string{"Application", phase}, Value: float64(n)})
			}
			return append(out, a.hooks.PhaseCounts()...)
		})
		routes = controllerRoutes{ctrl: a.ctrl, app: app, hooks: a.hooks}
		a.ctrls = append(a.ctrls, a.ctrl)
		if err := a.addWorkloads(cfg, reg.Client("opemu-workloads"), clk); err != nil {
			return nil, err
		}
		loopRoutes = loop{ctrls: func() []*reconciler.Controller {
			return sortControllers(append(slices.Clone(a.ctrls), a.hooks.Controllers()...))
		}, kinds: served, clk: clk}
	}
	if cfg.EnableController || cfg.EnableCollector {
		if a.collector, err = gc.New(gc.Config{Client: reg.Client(gc.Source), Kinds: served, Events: a.recorder, Logger: log, Clock: clk}); err != nil {
			return nil, err
		}
	}

	// Only the leader runs reconcile workers (and, over a shared store, the namespace
	// finisher and compaction). Without election (or with nothing to lead) this process leads
	// at once.
	var leaderStatus server.LeaderStatus
	backend := cfg.LeaseBackend
	if backend == "" && a.etcd != nil {
		backend = leader.BackendStore
	}
	if cfg.EnableLeaderElection && (a.ctrl != nil || a.collector != nil || a.etcd != nil) {
		a.elector, err = leader.New(leader.Config{
			Backend: backend, Identity: identity,
			LeaseName: cfg.LeaseName, LeaseNamespace: cfg.LeaseNamespace, LeaseFile: cfg.LeaseFile,
			LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
			Client:           reg.Client("leader-elector"),
			OnStartedLeading: a.lead,
			OnEvent: func(reason, message string) {
				a.recorder.Record(context.Background(), events.Event{
					Object: events.Ref{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: a.elector.LeaseNamespace(), Name: a.elector.LeaseName()},
					Type:   events.TypeNormal, Severity: events.Info, Reason: reason, Message: message, Source: "leader-elector",
				})
			},
			Metrics: a.metrics, Logger: log, Clock: electionClock,
		})
		if err != nil {
			return nil, err
		}
		if key, ok := a.elector.MirrorKey(); ok {
			readOnly = func(k cache.Key) bool { return k == key }
		}
		leaderStatus = a.elector
	}

	if a.etcd != nil {
		// Serve the kinds of the CRDs stored through any replica before serving anything.
		if a.crdsAt, err = crds.Load(context.Background(), a.store, log); err != nil {
			return nil, err
		}
	}
	var seeds []any
	for _, c := range crds.BuiltIns() {
		seeds = append(seeds, c)
	}
	if err := reg.Bootstrap(context.Background(), seeds...); err != nil {
		return nil, err
	}
	for _, obj := range cfg.Objects {
		if err := reg.Bootstrap(context.Background(), obj); err != nil {
			return nil, fmt.Errorf("app: creating %s: %w", describe(obj), err)
		}
	}
	storeName, storeHealth := StoreMemory, (func(context.Context) error)(nil)
	if a.etcd != nil {
		storeName, storeHealth = StoreEtcd, a.etcd.Health
	}
	ok = true
	a.server = server.Config{
		Store:       a.store,
		StoreName:   storeName,
		StoreHealth: storeHealth,
		Registry:    reg,
		Kinds:       served,
		CRDs:        crds,
		PrimaryCRD:  application.CRDName,
		Admission:   admission,
		Metrics:     a.metrics,
		Events:      a.recorder,
		Controller:  routes,
		Loop:        loopRoutes,
		Faults:      a.faults,
		ManualClock: manual,
		Leader:      leaderStatus,
		Logger:      log,
		Identity:    identity,
		Version:     cfg.Version,
		MaxBody:     cfg.MaxBody,
		MaxInflight: cfg.MaxInflight,
		MaxWatches:  cfg.MaxWatches,
		PProf:       cfg.PProf,
		Clock:       clk,

		AllowedHosts:   cfg.AllowedHosts,
		AllowedOrigins: cfg.AllowedOrigins,
		TLS:            cfg.TLS,
	}
	return a, nil
}

// Run serves on ln until ctx is done, then stops: the HTTP server drains, the controller's
// workers finish their item, the lease is released, the store closes. It returns once every
// goroutine it started has returned. It closes ln.
func (a *App) Run(ctx context.Context, ln net.Listener) error {
	defer a.closeStore()
	tokens, err := security(a.log, a.cfg, ln.Addr())
	if err != nil {
		_ = ln.Close()
		return err
	}
	a.server.Tokens = tokens
	srv, err := server.New(a.server)
	if err != nil {
		_ = ln.Close()
		return err
	}
	if a.cfg.Ready != nil {
		a.cfg.Ready()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.etcd == nil {
		wg.Go(func() { _ = a.recorder.Run(ctx) }) // on etcd, each Event's lease expires it
	} else {
		wg.Go(func() { _ = a.crds.Follow(ctx, a.store, a.crdsAt, a.etcd.EndWatches, a.log) })
		wg.Go(func() { _ = a.recorder.Work(ctx) })
	}
	wg.Go(func() { _ = a.faults.Run(ctx) })
	wg.Go(func() { _ = a.webhooks.Run(ctx) })
	if a.hooks != nil {
		wg.Go(func() { _ = a.hooks.Run(ctx) })
	}
	switch {
	case a.elector != nil:
		a.log.Info("leader election", "identity", a.cfg.PodName, "backend", a.elector.Backend(), "lease", a.elector.LeaseNamespace()+"/"+a.elector.LeaseName())
		wg.Go(func() { _ = a.elector.Run(ctx) })
	case a.ctrl != nil || a.collector != nil || a.etcd != nil:
		if a.ctrl != nil {
			a.metrics.SetLeader(true)
		}
		wg.Go(func() { a.lead(ctx) })
	}
	err = srv.Run(ctx, ln)
	cancel()
	wg.Wait()
	a.log.Info("stopped")
	return err
}

// lead is the work of the leader, until ctx ends: every controller (the Application's and the
// simulated workloads') and the garbage collector, each starting with a full list (a full
// resync); over a shared store also the finishing of Terminating namespaces and etcd's
// compaction (one replica does each for all). It returns once they all have, so the elector
// releases the lease only after the workers finished their item.
func (a *App) lead(ctx context.Context) {
	var wg sync.WaitGroup
	for _, c := range a.ctrls {
		wg.Go(func() { _ = c.Run(ctx) })
	}
	if a.collector != nil {
		wg.Go(func() { _ = a.collector.Run(ctx) })
	}
	if a.hooks != nil {
		wg.Go(func() { _ = a.hooks.Lead(ctx) })
	}
	if a.etcd != nil {
		wg.Go(func() { _ = a.etcd.RunCompaction(ctx, a.cfg.EtcdCompactionInterval) })
		wg.Go(func() { a.finishNamespaces(ctx) })
	}
	wg.Wait()
}

// finishNamespaces finishes Terminating namespaces every second (registry.FinishNamespaces).
func (a *App) finishNamespaces(ctx context.Context) {
	t := a.clock.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if err := a.reg.FinishNamespaces(ctx); err != nil && ctx.Err() == nil {
			a.log.Debug("finishing namespaces", "err", err)
		}
	}
}

// openStore makes the store cfg.Store names.
func (a *App) openStore(served *kinds.Registry, identity string) error {
	cfg := a.cfg
	cc := cache.Config{WatchHistory: cfg.WatchHistory, WatchHistoryBytes: cfg.WatchHistoryBytes, SelectableFields: served.AppendFields}
	switch cfg.Store {
	case "", StoreMemory:
		a.store = cache.New(cc)
		a.closeAll = a.store.Close
		return nil
	case StoreEtcd:
		if openEtcd == nil {
			return errors.New("app: STORE=etcd needs a binary built with etcd support: go build -tags etcd")
		}
		s, closeAll, err := openEtcd(cfg, cc, identity, a.log)
		if err != nil {
			return err
		}
		a.store, a.etcd, a.closeAll = s, s, closeAll
		return nil
	}
	return fmt.Errorf("app: unknown store %q", cfg.Store)
}

// describe names an object of Config.Objects for an error: its kind and name.
func describe(obj any) string {
	var meta struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Namespace string `json:"namespace"`
			Name      string `json:"name"`
		} `json:"metadata"`
	}
	raw, _ := json.Marshal(obj)
	_ = json.Unmarshal(raw, &meta)
	name := meta.Metadata.Name
	if meta.Metadata.Namespace != "" {
		name = meta.Metadata.Namespace + "/" + name
	}
	return strings.TrimSpace(meta.Kind + " " + strconv.Quote(name))
}

// closeStore closes the store (and etcd's client).
func (a *App) closeStore() { a.closeAll() }

// addWorkloads makes the controllers of the simulated workloads (package workloads): the
// Application controller's machinery and settings, each with its Reconciler.
func (a *App) addWorkloads(cfg Config, client workloads.Client, clk clock.WithTicker) error {
	wc := workloads.Config{Client: client, Events: a.recorder, RolloutStep: cfg.RolloutStep, JobDuration: cfg.JobDuration, Clock: clk}
	for _, w := range []struct {
		name string
		gr   cache.GroupResource
		r    reconciler.Reconciler
	}{
		{"deployment", workloads.DeploymentResource, workloads.NewDeployments(wc)},
		{"statefulset", workloads.StatefulSetResource, workloads.NewStatefulSets(wc)},
		{"job", workloads.JobResource, workloads.NewJobs(wc)},
	} {
		c, err := reconciler.New(reconciler.Config{
			Store: a.store, Resource: w.gr, Reconciler: w.r, Name: w.name,
			Workers: cfg.WorkerCount, ResyncInterval: cfg.ReconcileInterval, MaxRetries: cfg.MaxRetries,
			BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, QPS: cfg.QueueQPS, Burst: cfg.QueueBurst,
			Metrics: a.metrics, Logger: a.log, Clock: clk,
		})
		if err != nil {
			return err
		}
		a.ctrls = append(a.ctrls, c)
	}
	return nil
}

// controllerRoutes serves the controllers' routes (history, reconcile) by resource: the
// Application controller's for Applications, the Controllers' for the resources they name.
type controllerRoutes struct {
	ctrl  *reconciler.Controller
	app   *application.Reconciler
	hooks *hooks.Manager
}

func (c controllerRoutes) Enqueue(key cache.Key) bool {
	if key.GroupResource() == application.Resource {
		return c.ctrl.Enqueue(key)
	}
	return c.hooks.Enqueue(key)
}

func (c controllerRoutes) History(key cache.Key) (any, bool) {
	if key.GroupResource() == application.Resource {
		return c.app.History(key), true
	}
	h, ok := c.hooks.History(key)
	return h, ok
}

// resourceCounts feeds resource_count{kind,namespace} from the store's own counts.
func resourceCounts(store cache.Interface, served *kinds.Registry) func() []metrics.Count {
	return func() []metrics.Count {
		counts := store.Counts()
		out := make([]metrics.Count, 0, len(counts))
		for _, c := range counts {
			kind := c.GroupResource.String()
			if k, ok := served.Resource(c.GroupResource); ok {
				kind = k.Kind
			}
			out = append(out, metrics.Count{Labels: [2]string{kind, c.Namespace}, Value: float64(c.Count)})
		}
		return out
	}
}
