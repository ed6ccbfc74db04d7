// Command opemu emulates a Kubernetes-style API server in memory, with the operator pattern
// running inside it. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"sync"
	"syscall"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/leader"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/server"
	"github.com/opemu/opemu/webhooks"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr))
}

// run is main without os.Exit: it returns the process exit code (2 for invalid configuration).
func run(args []string, lookupEnv func(string) (string, bool), stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "kubeconfig" {
		return runKubeconfig(args[1:], lookupEnv, stdout, stderr)
	}
	cfg, err := parseConfig(args, lookupEnv, stdout)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "opemu: %v\n", err)
		return 2
	}
	log := newLogger(cfg, stderr)
	klog.SetSlogLogger(log) // client-go's elector logs through the same handler

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		// A second signal exits at once.
		<-ctx.Done()
		stop()
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		<-sig
		log.Warn("second signal: exiting now")
		os.Exit(1)
	}()

	if err := serve(ctx, cfg, log); err != nil {
		log.Error("opemu stopped", "err", err)
		return 1
	}
	return 0
}

// serve wires the packages together and blocks until ctx is done and everything has stopped.
// The first log line is "listening addr=<host:port>".
func serve(ctx context.Context, cfg config, log *slog.Logger) error {
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return err
	}
	log.Info("listening", "addr", ln.Addr().String())

	reg := metrics.New()
	store := cache.New(cache.Config{WatchHistory: cfg.WatchHistory, SelectableFields: selectableFields})
	defer store.Close()
	crds, err := crd.New()
	if err != nil {
		return err
	}
	reg.SetResourceCounts(resourceCounts(store, crds))
	admission, err := webhooks.NewApplicationChain(webhooks.Config{
		AllowedRegistries: cfg.AllowedRegistries,
		BlockedImages:     cfg.BlockedImages,
		Recorder:          reg,
	})
	if err != nil {
		return err
	}
	recorder := events.New(events.Config{
		Store: store, Host: cfg.PodName, Limit: cfg.EventLimit, TTL: cfg.EventTTL, Metrics: reg, Logger: log,
	})
	var wg sync.WaitGroup
	defer wg.Wait()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wg.Go(func() { _ = recorder.Run(ctx) })

	var routes server.Controller
	var ctrl *reconciler.Controller
	if cfg.EnableController {
		app := reconciler.NewApplication(reconciler.ApplicationConfig{Store: store, Events: recorder, RolloutStep: cfg.RolloutStep})
		ctrl, err = reconciler.New(reconciler.Config{
			Store: store, Resource: applications, Reconciler: app, Name: "application",
			Workers: cfg.WorkerCount, ResyncInterval: cfg.ReconcileInterval, MaxRetries: maxRetries(cfg.MaxRetries),
			BackoffBase: cfg.BackoffBase, BackoffMax: cfg.BackoffMax, QPS: cfg.QueueQPS, Burst: cfg.QueueBurst,
			Metrics: reg, Logger: log,
		})
		if err != nil {
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
		el, err := leader.New(leader.Config{
			Backend: cfg.LeaseBackend, Identity: cfg.PodName,
			LeaseName: cfg.LeaseName, LeaseNamespace: cfg.LeaseNamespace, LeaseFile: cfg.LeaseFile,
			LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
			Store:            store,
			OnStartedLeading: func(ctx context.Context) { _ = ctrl.Run(ctx) },
			OnEvent: func(reason, message string) {
				recorder.Record(context.Background(), events.Event{
					Object: events.Ref{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: cfg.LeaseNamespace, Name: cfg.LeaseName},
					Type:   events.TypeNormal, Severity: events.Info, Reason: reason, Message: message, Source: "leader-elector",
				})
			},
			Metrics: reg, Logger: log,
		})
		if err != nil {
			return err
		}
		if key, ok := el.MirrorKey(); ok {
			readOnly = func(k cache.Key) bool { return k == key }
		}
		leaderStatus = el
		log.Info("leader election", "identity", cfg.PodName, "backend", cfg.LeaseBackend, "lease", cfg.LeaseNamespace+"/"+cfg.LeaseName)
		wg.Go(func() { _ = el.Run(ctx) })
	case ctrl != nil:
		reg.SetLeader(true)
		wg.Go(func() { _ = ctrl.Run(ctx) })
	}

	srv, err := server.New(server.Config{
		Store:       store,
		CRDs:        crds,
		Admission:   admission,
		Metrics:     reg,
		Events:      recorder,
		Controller:  routes,
		Leader:      leaderStatus,
		ReadOnly:    readOnly,
		Logger:      log,
		Identity:    cfg.PodName,
		Version:     version,
		MaxBody:     cfg.MaxBody,
		MaxInflight: cfg.MaxInflight,
		PProf:       cfg.PProf,
	})
	if err != nil {
		return err
	}
	err = srv.Run(ctx, ln)
	cancel()
	wg.Wait()
	log.Info("stopped")
	return err
}

// applications is the resource the built-in controller reconciles.
var applications = cache.GroupResource{Group: "cloudnative.elide.dev", Resource: "applications"}

// selectableFields adds the field selectors beyond metadata.name/namespace: Events' and the
// Applications' status.phase (the controller counts phases from it).
func selectableFields(gr cache.GroupResource, obj map[string]any) fields.Set {
	if gr == events.Resource {
		return events.SelectableFields(gr, obj)
	}
	if gr == applications {
		st, _ := obj["status"].(map[string]any)
		phase, _ := st["phase"].(string)
		return fields.Set{"status.phase": phase}
	}
	return nil
}

// maxRetries maps MAX_RETRIES (0 allowed: drop at the first failure) to reconciler.Config.
func maxRetries(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// controllerRoutes serves the controller's routes for Applications.
type controllerRoutes struct {
	ctrl *reconciler.Controller
	app  *reconciler.Application
}

func (c controllerRoutes) Enqueue(key cache.Key) bool {
	return key.GroupResource() == applications && c.ctrl.Enqueue(key)
}

func (c controllerRoutes) History(key cache.Key) (any, bool) {
	if key.GroupResource() != applications {
		return nil, false
	}
	return c.app.History(key), true
}

// builtinKinds names the kinds of the built-in resources for metrics.
var builtinKinds = map[cache.GroupResource]string{
	cache.NamespacesResource:                           "Namespace",
	{Resource: "events"}:                               "Event",
	{Group: "coordination.k8s.io", Resource: "leases"}: "Lease",
}

// resourceCounts feeds resource_count{kind,namespace} from the store's own counts.
func resourceCounts(store *cache.Store, crds *crd.Registry) func() []metrics.Count {
	return func() []metrics.Count {
		counts := store.Counts()
		out := make([]metrics.Count, 0, len(counts))
		for _, c := range counts {
			kind, ok := builtinKinds[c.GroupResource]
			if k, found := crds.LookupResource(c.Group, c.Resource); found {
				kind, ok = k.Kind, true
			}
			if !ok {
				kind = c.GroupResource.String()
			}
			out = append(out, metrics.Count{Labels: [2]string{kind, c.Namespace}, Value: float64(c.Count)})
		}
		return out
	}
}

func newLogger(cfg config, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(cfg.LogLevel))
	opts := &slog.HandlerOptions{Level: level}
	if cfg.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
