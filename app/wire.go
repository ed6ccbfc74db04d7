package app

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/calls"
	"github.com/opemu/opemu/claims"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/disruption"
	"github.com/opemu/opemu/endpoints"
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
	"github.com/opemu/opemu/snapshot"
	"github.com/opemu/opemu/stages"
	"github.com/opemu/opemu/webhooks"
	"github.com/opemu/opemu/workloads"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The steps of New, in its order. Each fills the fields of App its name says and may use what
// the steps before it made.

// newStore opens the store Config.Store names, its watch cache indexing the fields the served
// kinds select on, and makes those kinds: the built-ins, with the Event kind carrying its rules
// (its TTL, an etcd lease on etcd, and over the in-memory store only EVENT_LIMIT: on etcd the
// lease alone bounds Events, as in kube-apiserver). (etcd's store waits for etcd until ctx
// ends.)
func (a *App) newStore(ctx context.Context) error {
	cfg := a.cfg
	eventKind := events.KindConfig{TTL: cfg.EventTTL, Clock: a.clock}
	if cfg.Store != StoreEtcd {
		eventKind.Limit = cmp.Or(cfg.EventLimit, events.DefaultLimit)
	}
	a.served = kinds.New(events.Kind(eventKind))
	cc := cache.Config{WatchHistory: cfg.WatchHistory, WatchHistoryBytes: cfg.WatchHistoryBytes, SelectableFields: a.served.AppendFields}
	switch cfg.Store {
	case "", StoreMemory:
		a.store = cache.New(cc)
		a.closeAll = a.store.Close
		return nil
	case StoreEtcd:
		s, closeAll, err := openEtcd(ctx, cfg, cc, a.identity, a.log)
		if err != nil {
			return err
		}
		a.store, a.etcd, a.closeAll = s, s, closeAll
		return nil
	}
	return fmt.Errorf("app: unknown store %q", cfg.Store)
}

// newKinds serves the built-in kinds (kinds.New, made with the store), the CRD kind, and the
// built-in CRDs: the Application, Fault and Controller kinds, and kwok's Stage when the Nodes'
// kubelets run (App.kubelets).
func (a *App) newKinds(context.Context) error {
	crds, err := crd.New(crd.Config{Kinds: a.served, Drop: a.store.DropResource, MaxCRDs: a.cfg.MaxCRDs, MaxCRDBytes: a.cfg.MaxCRDBytes, Logger: a.log})
	if err != nil {
		return err
	}
	a.crds = crds
	if err := a.served.Add(crds.Kind()); err != nil {
		return err
	}
	builtIns := []*apiextv1.CustomResourceDefinition{application.CRD(), faults.CRD(), hooks.CRD()}
	if a.kubelets() {
		c, err := stages.CRD()
		if err != nil {
			return err
		}
		builtIns = append(builtIns, c)
	}
	for _, c := range builtIns {
		if err := crds.AddBuiltIn(c); err != nil {
			return err
		}
	}
	a.metrics.SetResourceCounts(resourceCounts(a.store, a.served))
	return nil
}

// newWritePath makes the write path: the built-in admission handlers (the Application's
// defaulter, validator and image policy), the registry over the store, the Event recorder that
// writes through it, and the admission webhooks configured in the API, which the write path
// runs after the built-in handlers (/mutate and /validate serve the built-in ones only).
func (a *App) newWritePath(context.Context) error {
	cfg := a.cfg
	admission, err := application.NewChain(application.ChainConfig{
		AllowedRegistries: cfg.AllowedRegistries,
		BlockedImages:     cfg.BlockedImages,
		Recorder:          a.metrics,
	})
	if err != nil {
		return err
	}
	a.admission = admission
	writeAdmission := *admission
	// The write path records Events through the recorder, which writes them through the write
	// path: the write path makes it with the client it writes with.
	evcfg := events.Config{Host: a.identity, TTL: cfg.EventTTL, Metrics: a.metrics, Logger: a.log, Clock: a.clock}
	if a.etcd != nil {
		// An Event written to etcd costs a round trip: the action it records does not wait for it.
		evcfg.Queue = 10000
	}
	if err := a.newRecord(); err != nil {
		return err
	}
	a.reg, err = registry.New(registry.Config{
		Storage: a.store, Kinds: a.served, Admission: &writeAdmission, Clock: a.clock,
		Events: func(c *registry.Client) registry.EventRecorder {
			evcfg.Client = c
			a.recorder = events.New(evcfg)
			return a.recorder
		},
		ReadOnly: a.readOnly,
		MaxBody:  cfg.MaxBody,
		Calls:    a.calls,
	})
	if err != nil {
		return err
	}
	a.webhooks, err = hooks.NewAdmission(hooks.AdmissionConfig{Client: a.reg.Client("opemu-webhooks"), Kinds: a.served, Metrics: a.metrics, Logger: a.log})
	if err != nil {
		return err
	}
	var authz authorizer.UnconditionalAuthorizer // nil: AlwaysAllow
	if a.cfg.AuthorizationMode == AuthorizationRBAC {
		a.rbac = rbac.New(a.reg.Client("opemu-rbac"))
		writeAdmission.Validating = append(slices.Clip(writeAdmission.Validating), a.rbac.Escalation())
		authz = a.rbac
	}
	// The admission policies in CEL run before the webhooks, as kube-apiserver orders its
	// plugins (MutatingAdmissionPolicy before MutatingAdmissionWebhook, and likewise validating).
	a.policies, err = policies.New(policies.Config{Client: a.reg.Client("opemu-policies"), Kinds: a.served, Authorizer: authz, Logger: a.log})
	if err != nil {
		return err
	}
	writeAdmission.Configured = webhooks.Configs{a.policies, a.webhooks}
	// A deleted CRD's custom resources are deleted through the write path (crd/delete.go).
	a.crds.UseClient(a.reg.Client("apiextensions-apiserver"))
	return nil
}

// readOnly is the write path's Config.ReadOnly: the Lease the file backend mirrors into the
// store, which only the elector writes (newElector, after the write path it writes through,
// sets a.mirror; nothing reads it before New returns but opemu's own writes, which it spares).
func (a *App) readOnly(k cache.Key) bool { return a.mirror != nil && *a.mirror == k }

// newFaults makes the fault engine (SPEC §16), which reads the Fault objects.
func (a *App) newFaults(context.Context) (err error) {
	a.faults, err = faults.New(faults.Config{Client: a.reg.Client("opemu-faults"), Clock: a.clock, Metrics: a.metrics, Logger: a.log})
	return err
}

// newControllers makes, with Config.EnableController, the built-in controllers (the
// Application's and the simulated workloads', each a reconciler.Controller with a.tuning) and
// the Controllers' (hooks.Manager, with the same tuning), and the routes that show and drive
// them; with either EnableController or EnableCollector, the garbage collector and the
// namespace controller.
func (a *App) newControllers(context.Context) error {
	cfg := a.cfg
	if cfg.EnableController {
		app := application.New(application.Config{Client: a.reg.Client(application.Source), Events: a.recorder, RolloutStep: cfg.RolloutStep, Clock: a.clock})
		wc := workloads.Config{Client: a.reg.Client("opemu-workloads"), Events: a.recorder, Clock: a.clock}
		type builtIn struct {
			name string
			gr   cache.GroupResource
			r    reconciler.Reconciler
			// follow, when set, watches what else enqueues the controller's objects (their
			// children: workloads.FollowChildren) until ctx ends.
			follow func(ctx context.Context, enqueue func(cache.Key) bool)
		}
		children := func(gr cache.GroupResource, owner workloads.Owner) func(context.Context, func(cache.Key) bool) {
			return func(ctx context.Context, enqueue func(cache.Key) bool) {
				workloads.FollowChildren(ctx, a.store, gr, owner, enqueue)
			}
		}
		daemonSets := workloads.NewDaemonSets(wc)
		builtIns := []builtIn{
			{name: "application", gr: application.Resource, r: app},
			{name: "deployment", gr: workloads.DeploymentResource, r: workloads.NewDeployments(wc), follow: children(workloads.ReplicaSetResource, workloads.DeploymentOwner)},
			{name: "replicaset", gr: workloads.ReplicaSetResource, r: workloads.NewReplicaSets(wc), follow: children(workloads.PodResource, workloads.ReplicaSetOwner)},
			{name: "statefulset", gr: workloads.StatefulSetResource, r: workloads.NewStatefulSets(wc), follow: children(workloads.PodResource, workloads.StatefulSetOwner)},
			{name: "daemonset", gr: workloads.DaemonSetResource, r: daemonSets, follow: func(ctx context.Context, enqueue func(cache.Key) bool) {
				var wg sync.WaitGroup
				wg.Go(func() {
					workloads.FollowChildren(ctx, a.store, workloads.PodResource, workloads.DaemonSetOwner, enqueue)
				})
				daemonSets.FollowNodes(ctx, a.store, enqueue) // a Node's change may want or move their Pods
				wg.Wait()
			}},
			{name: "job", gr: workloads.JobResource, r: workloads.NewJobs(wc), follow: children(workloads.PodResource, workloads.JobOwner)},
			{name: "cronjob", gr: workloads.CronJobResource, r: workloads.NewCronJobs(wc), follow: children(workloads.JobResource, workloads.CronJobOwner)},
		}
		// kube-controller-manager's endpointslice and endpoint controllers, one controller
		// over Services that hears of their Pods.
		eps, err := endpoints.New(endpoints.Config{Slices: a.reg.Client(endpoints.SliceController), Endpoints: a.reg.Client(endpoints.EndpointsController), Events: a.recorder, Logger: a.log})
		if err != nil {
			return err
		}
		builtIns = append(builtIns, builtIn{name: "endpointslice", gr: endpoints.ServicesResource, r: eps, follow: func(ctx context.Context, enqueue func(cache.Key) bool) {
			eps.FollowPods(ctx, a.store, enqueue)
		}})
		if len(a.nodes.Names()) > 0 {
			// The scheduler and the Nodes' kubelets (package nodes), a controller over Pods.
			// The kubelets play the kwok Stages stored in the API (package stages).
			pods, err := nodes.NewPods(nodes.PodsConfig{Client: a.reg.Client(nodes.SchedulerManager), Nodes: a.nodes, Events: a.recorder, StoredStages: true})
			if err != nil {
				return err
			}
			a.pods = pods
			builtIns = append(builtIns, builtIn{name: "pod", gr: nodes.PodsResource, r: pods, follow: func(ctx context.Context, enqueue func(cache.Key) bool) {
				var wg sync.WaitGroup
				wg.Go(func() { pods.FollowStages(ctx, a.store, enqueue) }) // a Stage's change may move a Pod
				pods.FollowNodes(ctx, a.store, enqueue)                    // a Node's change may fit a Pod that waits
				wg.Wait()
			}})
			// kube-controller-manager's node lifecycle controller (with taint eviction and the
			// pod GC of deleted Nodes), a controller over Nodes that hears of their Pods.
			lifecycle, err := nodes.NewLifecycle(nodes.LifecycleConfig{Client: a.reg.Client(nodes.LifecycleManager), Events: a.recorder, Clock: a.clock, Logger: a.log})
			if err != nil {
				return err
			}
			a.lifecycle = lifecycle
			builtIns = append(builtIns, builtIn{name: "node", gr: nodes.NodesResource, r: lifecycle, follow: func(ctx context.Context, enqueue func(cache.Key) bool) {
				lifecycle.Follow(ctx, a.store, enqueue)
			}})
		}
		var names []string
		for _, c := range builtIns {
			ctrl, err := reconciler.New(reconciler.Config{Store: a.store, Resource: c.gr, Reconciler: c.r, Name: c.name, Tuning: a.tuning})
			if err != nil {
				return err
			}
			a.ctrls, names = append(a.ctrls, ctrl), append(names, c.name)
			if f, ok := c.r.(scheduleForgetter); ok {
				a.schedules = append(a.schedules, f)
			}
			if c.follow != nil {
				a.follows = append(a.follows, func(ctx context.Context) { c.follow(ctx, ctrl.Enqueue) })
			}
		}
		a.ctrl = a.ctrls[0]
		// The disruption controller keeps the PodDisruptionBudgets' status that evictions read.
		if a.disruption, err = disruption.New(disruption.Config{Client: a.reg.Client(disruption.Name), Tuning: a.tuning, Clock: a.clock}); err != nil {
			return err
		}
		a.policyStatus = policies.NewStatusController(a.reg.Client(policies.StatusControllerName), a.served, a.log)
		a.hooks, err = hooks.NewManager(hooks.Config{
			Clients: func(manager string) hooks.Client { return a.reg.Client(manager) },
			Kinds:   a.served, Events: a.recorder, Reserved: names, Tuning: a.tuning,
		})
		if err != nil {
			return err
		}
		a.metrics.SetPhaseCounts(func() []metrics.Count {
			var out []metrics.Count
			for phase, n := range a.ctrl.PhaseCounts() {
				out = append(out, metrics.Count{Labels: [2]string{"Application", phase}, Value: float64(n)})
			}
			return append(out, a.hooks.PhaseCounts()...)
		})
		a.routes = controllerRoutes{ctrl: a.ctrl, app: app, hooks: a.hooks}
		a.loop = loop{ctrls: func() []*reconciler.Controller {
			return sortControllers(append(slices.Clone(a.ctrls), a.hooks.Controllers()...))
		}, kinds: a.served, clk: a.clock}
	}
	if cfg.EnableController || cfg.EnableCollector {
		var err error
		if a.collector, err = gc.New(gc.Config{Client: a.reg.Client(gc.Source), Kinds: a.served, Events: a.recorder, Logger: a.log, Clock: a.clock}); err != nil {
			return err
		}
		if a.ns, err = namespaces.New(namespaces.Config{Client: a.reg.Client(namespaceController), Tuning: a.tuning}); err != nil {
			return err
		}
		if a.claims, err = claims.New(claims.Config{Client: a.reg.Client(claims.Name), Tuning: a.tuning}); err != nil {
			return err
		}
	}
	return nil
}

// The field managers of the cluster's own parts, as Kubernetes names them.
const (
	kubeAPIServer       = "kube-apiserver"
	namespaceController = "namespace-controller"
)

// kubelets reports whether the Nodes' kubelets run (Nodes, with the controllers): then kwok's
// Stage kind is served and its default Pod stages are stored.
func (a *App) kubelets() bool { return a.cfg.EnableController && a.cfg.Nodes > 0 }

// newNodes makes the cluster's Nodes (Config.Nodes), whose kubelets write as "kubelet".
func (a *App) newNodes(context.Context) (err error) {
	a.nodes, err = nodes.New(nodes.Config{Client: a.reg.Client(nodes.Manager), Count: a.cfg.Nodes, Clock: a.clock, Logger: a.log})
	return err
}

// newElector makes the elector when Config.EnableLeaderElection asks for it and this server
// has leader's work (App.leads). Only the leader runs reconcile workers (and, over a shared
// store, the Nodes' heartbeats, the kubernetes Service's endpoints and compaction); without an
// elector this process leads at once.
func (a *App) newElector(context.Context) error {
	cfg := a.cfg
	if !cfg.EnableLeaderElection || !a.leads() {
		return nil
	}
	backend := cfg.LeaseBackend
	if backend == "" && a.etcd != nil {
		backend = leader.BackendStore
	}
	var err error
	a.elector, err = leader.New(leader.Config{
		Backend: backend, Identity: a.identity,
		LeaseName: cfg.LeaseName, LeaseNamespace: cfg.LeaseNamespace, LeaseFile: cfg.LeaseFile,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
		Client:           a.reg.Client("leader-elector"),
		OnStartedLeading: a.lead,
		OnEvent: func(reason, message string) {
			a.recorder.Record(context.Background(), events.Event{
				Object: events.Ref{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: a.elector.LeaseNamespace(), Name: a.elector.LeaseName()},
				Type:   events.TypeNormal, Severity: events.Info, Reason: reason, Message: message, Source: "leader-elector",
			})
		},
		Metrics: a.metrics, Logger: a.log, Clock: a.electionClock(),
	})
	if err != nil {
		return err
	}
	if key, ok := a.elector.MirrorKey(); ok {
		a.mirror = &key
	}
	return nil
}

// electionClock is the elector's clock: Config.Clock, but the real clock when that is a manual
// one. client-go's elector cannot be given another (v0.37), and the mirror of the file lease is
// paced with it.
func (a *App) electionClock() clock.WithTicker {
	if _, manual := a.clock.(server.ManualClock); manual {
		return clock.RealClock{}
	}
	return a.clock
}

// bootstrap makes the stored state the server starts from: Config.Load's when it is set (a
// restore, whose end is settle's); otherwise settle's.
func (a *App) bootstrap(ctx context.Context) error {
	if a.cfg.Load != nil {
		if _, err := a.restore(ctx, a.cfg.Load, snapshot.RestoreOptions{}); err != nil {
			return fmt.Errorf("app: loading the snapshot: %w", err)
		}
		return nil
	}
	return a.settle(ctx)
}

// settle makes the server serve what the store holds and makes what a cluster has from its
// start where it is missing: it serves the kinds of the stored CRDs (those stored through any
// replica, over etcd; those a restore brought), then creates the system namespaces, the
// elector's lease namespace (opemu's own, as kube-system is kube-apiserver's), the built-in
// CRDs and Config.Objects through the write path (Registry.Bootstrap: an object that exists is
// kept), and registers the Nodes that are missing.
func (a *App) settle(ctx context.Context) error {
	var err error
	if a.crdsAt, err = a.crds.Load(ctx, a.store, a.log); err != nil {
		return err
	}
	var seeds []any
	if a.elector != nil && !slices.Contains(registry.SystemNamespaces, a.elector.LeaseNamespace()) {
		seeds = append(seeds, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": a.elector.LeaseNamespace()}})
	}
	for _, c := range a.crds.BuiltIns() {
		if !a.exists(ctx, c) {
			seeds = append(seeds, c)
		}
	}
	if a.rbac != nil {
		seeds = append(seeds, rbac.Bootstrap()...)
	}
	if a.kubelets() {
		// kwok's default Pod stages, with ROLLOUT_STEP on pod-ready and JOB_DURATION on
		// pod-complete; one that exists (replaced with kubectl apply) is kept.
		defaults, err := stages.Defaults(stages.Delays{Ready: a.cfg.RolloutStep, Complete: a.cfg.JobDuration})
		if err != nil {
			return err
		}
		for _, s := range defaults {
			if !a.exists(ctx, s) {
				seeds = append(seeds, s)
			}
		}
	}
	if err := a.reg.Bootstrap(ctx, seeds...); err != nil {
		return err
	}
	for _, obj := range a.cfg.Objects {
		if a.exists(ctx, obj) {
			continue
		}
		if err := a.reg.Bootstrap(ctx, obj); err != nil {
			return fmt.Errorf("app: creating %s: %w", describe(obj), err)
		}
	}
	return a.nodes.Register(ctx)
}

// exists reports whether obj (an object of Config.Objects or a built-in CRD) is stored, read
// from its type and object metadata, so that what a restore brought back is not encoded and
// admitted again only to be found there. False when that cannot be told (the write path
// decides).
func (a *App) exists(ctx context.Context, obj any) bool {
	var av, kind, ns, name string
	switch o := obj.(type) {
	case map[string]any:
		md, _ := o["metadata"].(map[string]any)
		av, _ = o["apiVersion"].(string)
		kind, _ = o["kind"].(string)
		ns, _ = md["namespace"].(string)
		name, _ = md["name"].(string)
	case interface {
		GetObjectKind() schema.ObjectKind
		GetNamespace() string
		GetName() string
	}:
		av, kind = o.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
		ns, name = o.GetNamespace(), o.GetName()
	}
	k, ok := a.served.ForKind(av, kind)
	if !ok || name == "" {
		return false
	}
	_, err := a.store.Get(ctx, cache.Key{Group: k.Group, Resource: k.Plural, Namespace: ns, Name: name})
	return err == nil
}

// serverConfig is the HTTP server's configuration over what the steps made (Run adds the
// tokens).
func (a *App) serverConfig() server.Config {
	cfg := a.cfg
	storeName, storeHealth := StoreMemory, (func(context.Context) error)(nil)
	if a.etcd != nil {
		storeName, storeHealth = StoreEtcd, a.etcd.Health
	}
	manual, _ := a.clock.(server.ManualClock)
	var leaderStatus server.LeaderStatus
	if a.elector != nil {
		leaderStatus = a.elector
	}
	return server.Config{
		StoreName:   storeName,
		StoreHealth: storeHealth,
		Registry:    a.reg,
		Kinds:       a.served,
		CRDs:        a.crds,
		PrimaryCRD:  application.CRDName,
		Admission:   a.admission,
		Metrics:     a.metrics,
		Events:      a.recorder,
		Controller:  a.routes,
		Loop:        a.loop,
		Faults:      a.faults,
		Snapshots:   a,
		ManualClock: manual,
		Leader:      leaderStatus,
		Logger:      a.log,
		Identity:    a.identity,
		Version:     cfg.Version,
		MaxBody:     cfg.MaxBody,
		MaxInflight: cfg.MaxInflight,
		MaxWatches:  cfg.MaxWatches,
		PProf:       cfg.PProf,
		Clock:       a.clock,

		AllowedHosts:   cfg.AllowedHosts,
		AllowedOrigins: cfg.AllowedOrigins,
		TLS:            cfg.TLS,
		ClientCA:       cfg.ClientCA,
		Authorizer:     a.authorizer(),
		Calls:          a.calls,
	}
}

// newRecord makes the record of calls (CallHistory) and the audit log that it feeds
// (AuditLogPath).
func (a *App) newRecord() error {
	if a.cfg.AuditLogPath != "" {
		audit, err := calls.OpenAudit(a.cfg.AuditLogPath, a.cfg.AuditPolicyFile)
		if err != nil {
			return err
		}
		a.audit = audit
	}
	if a.cfg.CallHistory < 0 && a.audit == nil {
		return nil
	}
	cfg := calls.Config{Size: a.cfg.CallHistory}
	if a.cfg.CallHistory < 0 {
		cfg.Size = 1 // the audit log alone: the ring is only its way in
	}
	if a.audit != nil {
		cfg.Sink = a.audit.Write
	}
	a.calls = calls.New(cfg)
	return nil
}

// authorizer is the server's Authorizer: the RBAC authorizer, or nil (AlwaysAllow).
func (a *App) authorizer() server.Authorizer {
	if a.rbac == nil {
		return nil
	}
	return a.rbac
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

// Calls is the record of calls (nil when none is kept).
func (a *App) Calls() *calls.Record { return a.calls }
