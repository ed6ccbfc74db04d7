package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

	"k8s.io/utils/clock"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/calls"
	"github.com/opemu/opemu/claims"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/disruption"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/faults"
	"github.com/opemu/opemu/gc"
	"github.com/opemu/opemu/hooks"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/leader"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/namespaces"
	"github.com/opemu/opemu/nodes"
	"github.com/opemu/opemu/policies"
	"github.com/opemu/opemu/rbac"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/server"
	"github.com/opemu/opemu/webhooks"
)

// Run listens on cfg.Addr and serves until ctx is done (see New and App.Run). The first log
// line is "listening addr=<host:port> dashboard=<URL>", with the real port when a free one was
// asked for, and the dashboard's URL as a browser on this machine opens it. With STORE=etcd the
// listener answers from that moment: while New waits for etcd (as long as it takes), /healthz is
// 200, /readyz 503 naming etcd and every other request a 503 Status (server.Starting); then the
// wired server takes the listener over. A ctx that ends while waiting is a normal stop.
func Run(ctx context.Context, cfg Config) error {
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	scheme := "http"
	if cfg.TLS != nil {
		scheme = "https"
	}
	log := logger(cfg)
	log.Info("listening", "addr", ln.Addr().String(), "dashboard", scheme+"://"+dialAddr(ln.Addr())+"/ui/")
	stopStarting := func() {}
	if cfg.Store == StoreEtcd {
		if stopStarting, err = server.Starting(ln, server.StartingConfig{Waiting: "etcd", TLS: cfg.TLS, Logger: log}); err != nil {
			_ = ln.Close()
			return err
		}
	}
	a, err := New(ctx, cfg)
	stopStarting()
	if err != nil {
		_ = ln.Close()
		if ctx.Err() != nil {
			log.Info("stopped before etcd answered", "err", err)
			return nil
		}
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

// App is one wired server. Create it with New, serve it with Run. New's steps (wire.go) fill
// its fields in the order they are declared; nothing changes them after New returns.
type App struct {
	cfg      Config
	log      *slog.Logger
	clock    clock.WithTicker
	identity string // Config.PodName, or "opemu"
	metrics  *metrics.Registry
	// tuning is every controller's queue settings, metrics, log and clock (from Config).
	tuning reconciler.Tuning

	// newStore
	store    cache.Interface
	etcd     sharedStore // the store when it is etcd's
	closeAll func()      // closes the store (and etcd's client); nil until the store is open
	// newKinds
	served *kinds.Registry
	crds   *crd.Registry
	// newWritePath
	admission *webhooks.Chain // the built-in admission handlers, which /mutate and /validate serve
	reg       *registry.Store
	calls     *calls.Record // the record of calls; nil with CallHistory < 0
	audit     *calls.Audit  // the audit log; nil without AuditLogPath
	recorder  *events.Recorder
	webhooks  *hooks.Admission   // the admission webhooks configured in the API
	policies  *policies.Policies // the admission policies in CEL configured in the API
	rbac      *rbac.Authorizer   // the authorizer with AuthorizationMode RBAC; nil otherwise
	// newFaults
	faults *faults.Engine
	// newControllers: all nil or empty when the controllers are off.
	ctrl       *reconciler.Controller   // the Application controller
	ctrls      []*reconciler.Controller // the built-in controllers: the Application's, then the workloads'
	hooks      *hooks.Manager           // the Controllers' controllers
	routes     server.Controller        // the controllers' routes (history, reconcile)
	loop       server.Loop              // pause, step, resume over every controller
	schedules  []scheduleForgetter      // the built-in reconcilers that keep when each object's next step is due
	follows    []func(context.Context)  // the watches of children that enqueue their owners (workloads.FollowChildren)
	pods       *nodes.Pods              // the scheduler and the kubelets, with Nodes and controllers
	lifecycle  *nodes.Lifecycle         // the node lifecycle controller, with Nodes and controllers
	disruption *disruption.Controller   // the PodDisruptionBudgets' status, with the controllers
	// policyStatus writes the ValidatingAdmissionPolicies' type checking, with the controllers
	policyStatus *policies.StatusController
	collector    *gc.Collector          // also made when only the collector is on
	ns           *namespaces.Controller // the namespace controller, made with the collector
	claims       *claims.Controller     // the pvc-protection controller, made with the collector
	// newNodes
	nodes *nodes.Nodes
	// newElector: nil when election is off.
	elector *leader.Elector
	mirror  *cache.Key // the Lease the file backend mirrors into the store (read-only to clients)
	// bootstrap
	crdsAt uint64 // the version the stored CRDs were loaded at (etcd)
	// restoring is held by a restore (snapshot.go): one at a time.
	restoring sync.Mutex
	// terms runs the leader's work (lead), which a restore pauses.
	terms leadership
	// Run: the kubernetes Service of Run's listener (lead reads it once Run has set it).
	apiService apiService

	// server is the HTTP server's configuration; Run completes it (tokens depend on the
	// listener) and serves it.
	server server.Config
}

// New wires a server from cfg, step by step (each step is a method in wire.go, named for what
// it makes):
//
//  1. newStore: the store, in memory or over etcd (Config.Store).
//  2. newKinds: the served kinds, the built-ins and the CRDs of the Application, Fault and
//     Controller kinds.
//  3. newWritePath: admission, the registry (every write goes through it), the Event recorder,
//     the admission webhooks configured in the API.
//  4. newFaults: the fault engine.
//  5. newNodes: the cluster's Nodes (Config.Nodes).
//  6. newControllers: the Application controller, the workloads' controllers, the scheduler
//     and kubelets of the Nodes (a controller of Pods), the Controllers' (hooks), the garbage
//     collector and the namespace controller, as Config asks.
//  7. newElector: leader election, when asked for and there is something to lead.
//  8. bootstrap: the CRDs other replicas stored (etcd), the system namespaces, the built-in
//     CRDs, Config.Objects, the Nodes that are missing.
//
// Nothing runs until Run, which adds the HTTP server. ctx bounds what wiring waits for (loading
// the stored CRDs, the bootstrap writes) and is not kept. On error nothing is left open.
func New(ctx context.Context, cfg Config) (*App, error) {
	a := &App{cfg: cfg, log: logger(cfg), clock: cfg.Clock, identity: cfg.PodName, metrics: metrics.New()}
	if a.clock == nil {
		a.clock = clock.RealClock{}
	}
	if a.identity == "" {
		a.identity = "opemu"
	}
	a.tuning = reconciler.Tuning{
		Workers: cfg.WorkerCount, ResyncInterval: cfg.ReconcileInterval, MaxRetries: cfg.MaxRetries,
		BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, QPS: cfg.QueueQPS, Burst: cfg.QueueBurst,
		Metrics: a.metrics, Logger: a.log, Clock: a.clock,
	}
	for _, step := range []func(context.Context) error{
		a.newStore, a.newKinds, a.newWritePath, a.newFaults, a.newNodes, a.newControllers, a.newElector, a.bootstrap,
	} {
		if err := step(ctx); err != nil {
			a.closeStore()
			if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
				// The write path answers a cancelled write with its Status (a 504): say why.
				err = fmt.Errorf("%w: %w", ctx.Err(), err)
			}
			return nil, err
		}
	}
	a.server = a.serverConfig()
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
	// The kubernetes Service exists when the server serves. With the memory store this server
	// is the cluster and keeps it pointing here; replicas sharing etcd create what is missing
	// and the leader points it at itself (lead).
	a.apiService = newAPIService(a.reg.Client(kubeAPIServer), ln.Addr(), a.clock)
	if err := a.apiService.ensure(ctx, a.etcd == nil); err != nil {
		_ = ln.Close()
		return fmt.Errorf("app: the kubernetes Service: %w", err)
	}
	if a.cfg.Ready != nil {
		a.cfg.Ready()
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if a.etcd == nil {
		// This process is its cluster: its kubelets and its API server's own objects are its.
		// (On etcd, each Event's lease expires it: no replica sweeps.)
		wg.Go(func() { _ = a.recorder.Run(ctx) })
		wg.Go(func() { _ = a.nodes.Run(ctx) })
		wg.Go(func() { a.apiService.run(ctx) })
	} else {
		wg.Go(func() { _ = a.crds.Follow(ctx, a.store, a.crdsAt, a.etcd.EndWatches, a.log) })
		wg.Go(func() { _ = a.recorder.Work(ctx) })
	}
	wg.Go(func() { _ = a.faults.Run(ctx) })
	wg.Go(func() { _ = a.webhooks.Run(ctx) })
	wg.Go(func() { _ = a.policies.Run(ctx) })
	if a.hooks != nil {
		wg.Go(func() { _ = a.hooks.Run(ctx) })
	}
	switch {
	case a.elector != nil:
		a.log.Info("leader election", "identity", a.cfg.PodName, "backend", a.elector.Backend(), "lease", a.elector.LeaseNamespace()+"/"+a.elector.LeaseName())
		wg.Go(func() { _ = a.elector.Run(ctx) })
	case a.leads():
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

// leads reports whether this server has leader's work (see lead): controllers, the collector
// and the namespace controller, or a shared store's upkeep.
func (a *App) leads() bool {
	return len(a.ctrls) > 0 || a.collector != nil || a.etcd != nil
}

// lead is the work of the leader, until ctx ends: every controller (the Application's and the
// simulated workloads'), the garbage collector, the namespace and pvc-protection controllers, each starting
// with a full list (a full resync); over a shared store also the Nodes' heartbeats, the
// kubernetes Service's endpoints (pointed at this replica) and etcd's compaction (one replica
// does each for all). It returns once they all have, so the elector releases the lease only
// after the workers finished their item. A restore ends the work and starts it again in a new
// term (leadership).
func (a *App) lead(ctx context.Context) { a.terms.run(ctx, a.leadTerm) }

// leadTerm is one term of the leader's work (see lead), until ctx ends.
func (a *App) leadTerm(ctx context.Context) {
	var wg sync.WaitGroup
	if a.pods != nil {
		a.pods.Reset() // what the bound Pods use is listed again
		a.lifecycle.Reset()
	}
	for _, c := range a.ctrls {
		wg.Go(func() { _ = c.Run(ctx) })
	}
	for _, f := range a.follows {
		wg.Go(func() { f(ctx) })
	}
	if a.disruption != nil {
		wg.Go(func() { _ = a.disruption.Run(ctx) })
		wg.Go(func() { _ = a.policyStatus.Run(ctx) })
	}
	if a.collector != nil {
		wg.Go(func() { _ = a.collector.Run(ctx) })
		wg.Go(func() { _ = a.ns.Run(ctx) })
		wg.Go(func() { _ = a.claims.Run(ctx) })
	}
	if a.hooks != nil {
		wg.Go(func() { _ = a.hooks.Lead(ctx) })
	}
	if a.etcd != nil {
		wg.Go(func() { _ = a.etcd.RunCompaction(ctx, a.cfg.EtcdCompactionInterval) })
		wg.Go(func() { _ = a.nodes.Run(ctx) })
		wg.Go(func() {
			if err := a.apiService.ensure(ctx, true); err != nil && ctx.Err() == nil {
				a.log.Warn("the kubernetes Service", "err", err)
			}
			a.apiService.run(ctx)
		})
	}
	wg.Wait()
}

// closeStore closes the store (and etcd's client), if it is open.
func (a *App) closeStore() {
	if a.closeAll != nil {
		a.closeAll()
	}
	if err := a.audit.Close(); err != nil {
		a.log.Error("closing the audit log", "err", err)
	}
}
