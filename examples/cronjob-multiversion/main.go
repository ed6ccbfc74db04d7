// Command cronjob-multiversion is the manager of the kubebuilder book's multiversion CronJob,
// reduced to what the chapter is about: the CronJob's two versions and the conversion webhook
// that turns one into the other (controller-runtime's, served at /convert). See README.md.
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
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	batchv1 "github.com/opemu/opemu/examples/cronjob-multiversion/api/v1"
	batchv2 "github.com/opemu/opemu/examples/cronjob-multiversion/api/v2"
)

// options are the manager's settings (the flags of main).
type options struct {
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string
}

func main() {
	var o options
	flag.StringVar(&o.WebhookHost, "webhook-host", "127.0.0.1", "address the webhook server listens on")
	flag.IntVar(&o.WebhookPort, "webhook-port", 9443, "port of the webhook server")
	flag.StringVar(&o.WebhookCertDir, "webhook-cert-dir", "", "directory of the webhook server's tls.crt and tls.key (default: controller-runtime's)")
	flag.Parse()
	ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))
	mgr, err := newManager(ctrl.GetConfigOrDie(), o)
	if err == nil {
		err = mgr.Start(ctrl.SetupSignalHandler())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cronjob-multiversion:", err)
		os.Exit(1)
	}
}

// newScheme is client-go's kinds and both CronJob versions.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, batchv1.AddToScheme, batchv2.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// newManager makes the manager with its webhook server, where the conversion webhook is
// registered: controller-runtime serves /convert once a kind has a Hub (v1) and Convertible
// spokes (v2).
func newManager(cfg *rest.Config, o options) (ctrl.Manager, error) {
	s, err := newScheme()
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 s,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		WebhookServer:          webhook.NewServer(webhook.Options{Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.WebhookCertDir}),
	})
	if err != nil {
		return nil, fmt.Errorf("making the manager: %w", err)
	}
	if err := ctrl.NewWebhookManagedBy(mgr, &batchv1.CronJob{}).Complete(); err != nil {
		return nil, fmt.Errorf("setting up the conversion webhook: %w", err)
	}
	return mgr, nil
}
