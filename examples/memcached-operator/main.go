// Command memcached-operator runs the Memcached operator of the kubebuilder book's pattern
// (see README.md): a controller-runtime manager with the Memcached controller and its
// defaulting and validating webhooks, against the cluster of the current kubeconfig (opemu's:
// `opemu kubeconfig`).
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/go-logr/logr"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	cachev1alpha1 "github.com/opemu/opemu/examples/memcached-operator/api/v1alpha1"
	"github.com/opemu/opemu/examples/memcached-operator/internal/controller"
	webhookv1alpha1 "github.com/opemu/opemu/examples/memcached-operator/internal/webhook/v1alpha1"
)

// options are the operator's settings (its flags).
type options struct {
	// MetricsAddr and ProbeAddr are where the manager serves metrics and health probes; "0"
	// serves none.
	MetricsAddr, ProbeAddr string
	// LeaderElect runs the manager with leader election (a Lease in LeaderElectionNamespace).
	LeaderElect             bool
	LeaderElectionNamespace string
	// Webhooks serves the defaulting and validating webhooks on WebhookHost:WebhookPort with
	// the tls.crt and tls.key of WebhookCertDir.
	Webhooks       bool
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
	// Logger, when set, is the manager's logger (default: controller-runtime's ctrl.Log).
	Logger logr.Logger
	// SecondManager lets this manager's controller share its name with another's in the same
	// process (a test running a second manager as another user).
	SecondManager bool
}

func main() {
	var o options
	flag.StringVar(&o.MetricsAddr, "metrics-bind-address", "0", "address of the metrics endpoint (0: none)")
	flag.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "address of the health probes (0: none)")
	flag.BoolVar(&o.LeaderElect, "leader-elect", false, "elect a leader among the operator's replicas")
	flag.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", "default", "namespace of the leader election Lease")
	flag.BoolVar(&o.Webhooks, "enable-webhooks", true, "serve the defaulting and validating webhooks")
	flag.StringVar(&o.WebhookHost, "webhook-host", "127.0.0.1", "address the webhook server listens on")
	flag.IntVar(&o.WebhookPort, "webhook-port", 9443, "port of the webhook server")
	flag.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "", "directory of the webhook server's tls.crt and tls.key (default: controller-runtime's)")
	flag.Parse()
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))

	mgr, err := newManager(ctrl.GetConfigOrDie(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "memcached-operator:", err)
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		fmt.Fprintln(os.Stderr, "memcached-operator:", err)
		os.Exit(1)
	}
}

// newManager is the operator: a manager for cfg's cluster running the Memcached controller
// and, with o.Webhooks, its webhooks. Start it to run them.
func newManager(cfg *rest.Config, o options) (ctrl.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := cachev1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgrOpts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        "memcached-operator.cache.example.com",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
	}
	if o.Logger.GetSink() != nil {
		mgrOpts.Logger = o.Logger
	}
	if o.SecondManager {
		mgrOpts.Controller.SkipNameValidation = ptr.To(true)
	}
	if o.Webhooks {
		mgrOpts.WebhookServer = webhook.NewServer(webhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir})
	}
	mgr, err := ctrl.NewManager(cfg, mgrOpts)
	if err != nil {
		return nil, fmt.Errorf("making the manager: %w", err)
	}
	r := &controller.MemcachedReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Recorder: mgr.GetEventRecorder("memcached-controller")}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("setting up the controller: %w", err)
	}
	if o.Webhooks {
		if err := webhookv1alpha1.SetupMemcachedWebhookWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the webhooks: %w", err)
		}
	}
	if o.ProbeAddr != "0" {
		if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
			return nil, err
		}
	}
	return mgr, nil
}
