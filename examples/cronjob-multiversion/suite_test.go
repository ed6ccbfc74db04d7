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
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/opemu/opemu/examples/internal/suitetest"
	"github.com/opemu/opemu/testenv"
)

// The suite's environment, as the book's suite_test.go sets it up: the CRD of
// config/crd/bases installed with its conversion pointed at this process's webhook server
// (the CronJob is convertible in the scheme: a v1 hub and a v2 spoke), and the manager
// serving /convert. testenv by default; envtest's existing-cluster mode with
// USE_EXISTING_CLUSTER=true (KUBECONFIG names a running opemu).

var (
	// cfg talks to the environment.
	cfg *rest.Config
	// k8sClient is an uncached client with both CronJob versions in its scheme.
	k8sClient client.WithWatch
	// existingCluster is USE_EXISTING_CLUSTER=true.
	existingCluster = os.Getenv("USE_EXISTING_CLUSTER") == "true"
)

var crdPaths = []string{filepath.Join("config", "crd", "bases")}

func TestMain(m *testing.M) {
	code, err := runSuite(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "suite:", err)
		code = 1
	}
	os.Exit(code)
}

// runSuite starts the environment and the manager, runs the tests, and stops both.
func runSuite(m *testing.M) (int, error) {
	ctrl.SetLogger(logr.Discard())
	if os.Getenv("TEST_LOG") != "" {
		ctrl.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, nil)))
	}
	s, err := newScheme()
	if err != nil {
		return 0, err
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil { // the tests read the CRD
		return 0, err
	}
	var (
		host, certDir string
		port          int
		stop          func() error
	)
	if existingCluster {
		env := &envtest.Environment{CRDDirectoryPaths: crdPaths, ErrorIfCRDPathMissing: true, Scheme: s}
		if cfg, err = env.Start(); err != nil {
			return 0, fmt.Errorf("envtest (existing cluster): %w", err)
		}
		stop = env.Stop
		w := env.WebhookInstallOptions
		host, port, certDir = w.LocalServingHost, w.LocalServingPort, w.LocalServingCertDir
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		env, err := testenv.Start(ctx, testenv.Options{CRDDirectoryPaths: crdPaths, ErrorIfCRDPathMissing: true, Scheme: s})
		cancel()
		if err != nil {
			return 0, err
		}
		cfg, stop = env.Config, env.Stop
		w := env.WebhookInstallOptions
		host, port, certDir = w.LocalServingHost, w.LocalServingPort, w.LocalServingCertDir
	}
	defer func() { _ = stop() }()

	mgr, err := newManager(cfg, options{WebhookHost: host, WebhookPort: port, WebhookCertDir: certDir})
	if err != nil {
		return 0, err
	}
	if k8sClient, err = client.NewWithWatch(cfg, client.Options{Scheme: s}); err != nil {
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
