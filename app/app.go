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
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/leader"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/server"
)

// Run listens on cfg.Addr and serves until ctx is done (see Serve). The first log line is
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
	return Serve(ctx, cfg, ln)
}

func logger(cfg Config) *slog.Logger {
	if cfg.Logger == nil {
		return slog.Default()
	}
	return cfg.Logger
}

// Serve wires one server on ln and blocks until ctx is done and everything it started has
// stopped: the HTTP server drains, the controller's workers finish their item, the lease is
// released. It closes ln.
func Serve(ctx context.Context, cfg Config, ln net.Listener) error {
	log := logger(cfg)
	tokens, err := security(log, cfg, ln.Addr())
	if err != nil {
		_ = ln.Close()
		return err
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	reg := metrics.New()
	served := kinds.New()
	store := cache.New(cache.Config{WatchHistory: cfg.WatchHistory, SelectableFields: served.FieldSet, Now: clk.Now})
	defer store.Close()
	crds, err := crd.New(crd.Config{Kinds: served, Drop: store.DropResource})
	if err == nil {
		err = served.Add(crds.Kind())
	}
	if err == nil {
		err = crds.AddBuiltIn(application.CRD())
	}
	if err != nil {
		_ = ln.Close()
		return err
	}
	reg.SetResourceCounts(resourceCounts(store, served))
	admission, err := application.NewChain(application.ChainConfig{
		AllowedRegistries: cfg.AllowedRegistries,
		BlockedImages:     cfg.BlockedImages,
		Recorder:          reg,
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	identity := cfg.PodName
	if identity == "" {
		identity = "opemu"
	}
	recorder := events.New(events.Config{
		Store: store, Host: identity, Limit: cfg.EventLimit, TTL: cfg.EventTTL, Metrics: reg, Logger: log, Clock: clk,
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { _ = recorder.Run(ctx) })

	var routes server.Controller
	var ctrl *reconciler.Controller
	if cfg.EnableController {
		app := application.New(application.Config{Store: store, Events: recorder, RolloutStep: cfg.RolloutStep, Clock: clk})
		ctrl, err = reconciler.New(reconciler.Config{
			Store: store, Resource: application.Resource, Reconciler: app, Name: "application",
			Workers: cfg.WorkerCount, ResyncInterval: cfg.ReconcileInterval, MaxRetries: cfg.MaxRetries,
			BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, QPS: cfg.QueueQPS, Burst: cfg.QueueBurst,
			Metrics: reg, Logger: log, Clock: clk,
		})
		if err != nil {
			_ = ln.Close()
			return err
		}
		reg.SetPhaseCounts(func() []metrics.Count {
			var out []metrics.Count
			for phase, n := range ctrl.PhaseCounts() {
				out = append(out, metrics.Count{Labels: [2]string{"Application", phase}, Value: float64(n)})
			}
			return out
		})
		routes = controllerRoutes{ctrl: ctrl, app: app}
	}

	// Only the leader runs reconcile workers. Without election (or without a controller, when
	// there is nothing to lead) this process leads at once.
	var leaderStatus server.LeaderStatus
	var readOnly func(cache.Key) bool
	switch {
	case ctrl != nil && cfg.EnableLeaderElection:
		// el is set before Run starts the election, so OnEvent (called while it runs) sees it.
		var el *leader.Elector
		el, err = leader.New(leader.Config{
			Backend: cfg.LeaseBackend, Identity: identity,
			LeaseName: cfg.LeaseName, LeaseNamespace: cfg.LeaseNamespace, LeaseFile: cfg.LeaseFile,
			LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
			Store:            store,
			OnStartedLeading: func(ctx context.Context) { _ = ctrl.Run(ctx) },
			OnEvent: func(reason, message string) {
				recorder.Record(context.Background(), events.Event{
					Object: events.Ref{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: el.LeaseNamespace(), Name: el.LeaseName()},
					Type:   events.TypeNormal, Severity: events.Info, Reason: reason, Message: message, Source: "leader-elector",
				})
			},
			Metrics: reg, Logger: log, Clock: clk,
		})
		if err != nil {
			_ = ln.Close()
			return err
		}
		if key, ok := el.MirrorKey(); ok {
			readOnly = func(k cache.Key) bool { return k == key }
		}
		leaderStatus = el
		log.Info("leader election", "identity", identity, "backend", el.Backend(), "lease", el.LeaseNamespace()+"/"+el.LeaseName())
		wg.Go(func() { _ = el.Run(ctx) })
	case ctrl != nil:
		reg.SetLeader(true)
		wg.Go(func() { _ = ctrl.Run(ctx) })
	}

	srv, err := server.New(server.Config{
		Store:       store,
		Kinds:       served,
		CRDs:        crds,
		PrimaryCRD:  application.CRDName,
		Admission:   admission,
		Metrics:     reg,
		Events:      recorder,
		Controller:  routes,
		Leader:      leaderStatus,
		ReadOnly:    readOnly,
		Logger:      log,
		Identity:    identity,
		Version:     cfg.Version,
		MaxBody:     cfg.MaxBody,
		MaxInflight: cfg.MaxInflight,
		PProf:       cfg.PProf,
		Clock:       clk,

		AllowedHosts:   cfg.AllowedHosts,
		AllowedOrigins: cfg.AllowedOrigins,
		Tokens:         tokens,
		TLS:            cfg.TLS,
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	err = srv.Run(ctx, ln)
	cancel()
	wg.Wait()
	log.Info("stopped")
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
func resourceCounts(store *cache.Store, served *kinds.Registry) func() []metrics.Count {
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
