package app

import (
	"context"
	"log/slog"
	"net"
	"sync"

	"k8s.io/utils/clock"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/faults"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/leader"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/server"
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

// App is one wired server. Create it with New, serve it with Run.
type App struct {
	cfg      Config
	log      *slog.Logger
	store    *cache.Store
	recorder *events.Recorder
	ctrl     *reconciler.Controller // nil when the controller is off
	elector  *leader.Elector        // nil when election is off
	faults   *faults.Engine
	metrics  *metrics.Registry
	// server is the HTTP server's configuration; Run completes it (tokens depend on the
	// listener) and serves it.
	server server.Config
}

// New wires a server: the store, the served kinds (the built-ins, the Application and Fault
// CRDs), admission, the write path, the event recorder, the fault engine, the controller and
// the elector when asked for. Nothing runs until Run, which adds the HTTP server.
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
	a := &App{cfg: cfg, log: log, metrics: metrics.New()}
	served := kinds.New()
	a.store = cache.New(cache.Config{WatchHistory: cfg.WatchHistory, WatchHistoryBytes: cfg.WatchHistoryBytes, SelectableFields: served.FieldSet})
	crds, err := crd.New(crd.Config{Kinds: served, Drop: a.store.DropResource})
	if err != nil {
		return nil, err
	}
	if err := served.Add(crds.Kind()); err != nil {
		return nil, err
	}
	if err := crds.AddBuiltIn(application.CRD()); err != nil {
		return nil, err
	}
	if err := crds.AddBuiltIn(faults.CRD()); err != nil {
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

	// The write path records Events through the recorder, which writes them through the write
	// path: the recorder is made second and reached through a.recorder.
	var readOnly func(cache.Key) bool
	late := &events.Late{}
	reg, err := registry.New(registry.Config{
		Storage: a.store, Kinds: served, Admission: admission, Clock: clk,
		Events:     late,
		EventLimit: late,
		ReadOnly:   func(k cache.Key) bool { return readOnly != nil && readOnly(k) },
		MaxBody:    cfg.MaxBody,
	})
	if err != nil {
		return nil, err
	}
	a.recorder = events.New(events.Config{
		Client: reg.Client("opemu-events"), Host: identity, Limit: cfg.EventLimit, TTL: cfg.EventTTL,
		Metrics: a.metrics, Logger: log, Clock: clk,
	})
	late.Set(a.recorder)

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
		a.metrics.SetPhaseCounts(func() []metrics.Count {
			var out []metrics.Count
			for phase, n := range a.ctrl.PhaseCounts() {
				out = append(out, metrics.Count{Labels: [2]string{"Application", phase}, Value: float64(n)})
			}
			return out
		})
		routes = controllerRoutes{ctrl: a.ctrl, app: app}
		loopRoutes = loop{ctrls: sortControllers([]*reconciler.Controller{a.ctrl}), clk: clk}
	}

	// Only the leader runs reconcile workers. Without election (or without a controller, when
	// there is nothing to lead) this process leads at once.
	var leaderStatus server.LeaderStatus
	if a.ctrl != nil && cfg.EnableLeaderElection {
		a.elector, err = leader.New(leader.Config{
			Backend: cfg.LeaseBackend, Identity: identity,
			LeaseName: cfg.LeaseName, LeaseNamespace: cfg.LeaseNamespace, LeaseFile: cfg.LeaseFile,
			LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
			Client:           reg.Client("leader-elector"),
			OnStartedLeading: func(ctx context.Context) { _ = a.ctrl.Run(ctx) },
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

	var seeds []any
	for _, c := range crds.BuiltIns() {
		seeds = append(seeds, c)
	}
	if err := reg.Bootstrap(context.Background(), seeds...); err != nil {
		return nil, err
	}
	a.server = server.Config{
		Store:       a.store,
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
	defer a.store.Close()
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
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { _ = a.recorder.Run(ctx) })
	wg.Go(func() { _ = a.faults.Run(ctx) })
	switch {
	case a.elector != nil:
		a.log.Info("leader election", "identity", a.cfg.PodName, "backend", a.elector.Backend(), "lease", a.elector.LeaseNamespace()+"/"+a.elector.LeaseName())
		wg.Go(func() { _ = a.elector.Run(ctx) })
	case a.ctrl != nil:
		a.metrics.SetLeader(true)
		wg.Go(func() { _ = a.ctrl.Run(ctx) })
	}
	err = srv.Run(ctx, ln)
	cancel()
	wg.Wait()
	a.log.Info("stopped")
	return err
}

// controllerRoutes serves the controller's routes for Applications.
type controllerRoutes struct {
	ctrl *reconciler.Controller
	app  *application.Reconciler
}

func (c controllerRoutes) Enqueue(key cache.Key) bool {
	return key.GroupResource() == application.Resource && c.ctrl.Enqueue(key)
}

func (c controllerRoutes) History(key cache.Key) (any, bool) {
	if key.GroupResource() != application.Resource {
		return nil, false
	}
	return c.app.History(key), true
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
