package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/opemu/opemu/examples/internal/suitetest"
	"github.com/opemu/opemu/testenv"
)

// The suite's environment, as a kubebuilder suite_test.go sets it up: the CRDs of
// config/crd/bases installed, the webhook configurations of config/webhook pointed at this
// process's webhook server, and the operator's manager running. By default the environment is
// opemu started in this process by testenv, in milliseconds. With USE_EXISTING_CLUSTER=true
// it is envtest's existing-cluster mode against whatever KUBECONFIG names (a running opemu:
// `opemu kubeconfig`); the tests are the same.

var (
	// cfg talks to the environment.
	cfg *rest.Config
	// k8sClient is an uncached client of the environment (reads see every write at once).
	k8sClient client.Client
	// existingCluster is USE_EXISTING_CLUSTER=true: the suite runs on envtest's existing
	// cluster mode.
	existingCluster = os.Getenv("USE_EXISTING_CLUSTER") == "true"
)

var (
	crdPaths     = []string{filepath.Join("config", "crd", "bases")}
	webhookPaths = []string{filepath.Join("config", "webhook")}
)

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "suite:", err)
		code = 1
	}
	os.Exit(code)
}

// runSuite starts the environment and the operator, runs the tests, and stops both.
func runSuite(m *testing.M) (int, error) {
	// controller-runtime logs nothing unless asked (TEST_LOG=1), and does not complain that
	// no logger was set.
	ctrl.SetLogger(logr.Discard())
	if os.Getenv("TEST_LOG") != "" {
		ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))
	}
	var (
		host    string
		port    int
		certDir string
		stop    func() error
	)
	if existingCluster {
		env := &envtest.Environment{
			CRDDirectoryPaths:     crdPaths,
			ErrorIfCRDPathMissing: true,
			WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: webhookPaths},
		}
		c, err := env.Start()
		if err != nil {
			return 0, fmt.Errorf("envtest (existing cluster): %w", err)
		}
		cfg, stop = c, env.Stop
		w := env.WebhookInstallOptions
		host, port, certDir = w.LocalServingHost, w.LocalServingPort, w.LocalServingCertDir
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		env, err := testenv.Start(ctx, testenv.Options{
			CRDDirectoryPaths:     crdPaths,
			ErrorIfCRDPathMissing: true,
			WebhookInstallOptions: testenv.WebhookInstallOptions{Paths: webhookPaths},
		})
		cancel()
		if err != nil {
			return 0, err
		}
		cfg, stop = env.Config, env.Stop
		w := env.WebhookInstallOptions
		host, port, certDir = w.LocalServingHost, w.LocalServingPort, w.LocalServingCertDir
	}
	defer func() { _ = stop() }()

	mgr, err := newManager(cfg, options{
		MetricsAddr: "0", ProbeAddr: "0",
		Webhooks: true, WebhookHost: host, WebhookPort: port, WebhookCertDir: certDir,
	})
	if err != nil {
		return 0, err
	}
	if k8sClient, err = client.New(cfg, client.Options{Scheme: mgr.GetScheme()}); err != nil {
		return 0, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		<-done
	}()
	if err := suitetest.WaitForWebhookServer(net.JoinHostPort(host, strconv.Itoa(port)), done); err != nil {
		return 0, err
	}
	return m.Run(), nil
}
