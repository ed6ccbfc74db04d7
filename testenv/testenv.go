package testenv

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/server"
)

// Options configure an Environment. The zero value serves the API with no CRD of the suite's,
// no webhook, and opemu's own Application controller off.
type Options struct {
	// CRDDirectoryPaths are directories (every .yaml, .yml and .json file in them, not
	// recursively) or files of CustomResourceDefinitions to install, several documents per
	// file allowed; documents of other kinds are ignored. Merged with CRDInstallOptions.Paths.
	CRDDirectoryPaths []string
	// CRDs are CustomResourceDefinitions to install beside those read from files. Merged with
	// CRDInstallOptions.CRDs.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// ErrorIfCRDPathMissing makes a path of CRDDirectoryPaths that does not exist an error;
	// otherwise it is skipped, as envtest skips it.
	ErrorIfCRDPathMissing bool
	// CRDInstallOptions are envtest's other way of saying the same: Paths, CRDs and
	// ErrorIfPathMissing are merged with the fields above.
	CRDInstallOptions CRDInstallOptions
	// WebhookInstallOptions are the suite's admission webhook configurations and the local
	// serving certificate made for its webhook server (see WebhookInstallOptions). Start fills
	// in what it chose; read it back from Environment.WebhookInstallOptions.
	WebhookInstallOptions WebhookInstallOptions
	// Scheme says which CRDs get a conversion webhook, as envtest's Scheme: those whose kind
	// has a Hub and Convertible spokes in it (controller-runtime's conversion.IsConvertible).
	// Nil means client-go's scheme.Scheme, where suites usually add their types.
	Scheme *runtime.Scheme

	// Controller runs opemu's built-in Application controller. Off by default: a suite tests
	// its own controllers. (The garbage collector runs either way, as a cluster's does.)
	Controller bool
	// RBAC turns authorization on, as kube-apiserver's --authorization-mode=RBAC: every request
	// is decided by the Roles and bindings stored, kube's bootstrap policy among them.
	// Environment.Config is then the admin's (group system:masters) and AddUser makes clients
	// for other users. Off, as before, every request is allowed.
	RBAC bool
	// AttachControlPlaneOutput writes the server's log to os.Stderr, as envtest attaches its
	// control plane's output; so does KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT=true.
	AttachControlPlaneOutput bool
	// Logger receives the server's log. Nil discards it (unless AttachControlPlaneOutput).
	Logger *slog.Logger
	// Server holds any further setting of the server (a manual Clock, RolloutStep, limits).
	// Addr, EnableController, EnableCollector and Logger are set by testenv from the fields above; its Objects
	// are created after the CRDs and webhook configurations (objects every test of a suite
	// expects, of those kinds among others).
	Server app.Config
}

// CRDInstallOptions are the fields of envtest's CRDInstallOptions that mean something here.
// (MaxTime and PollInterval do not: CRDs are served when Start returns. CleanUpAfterUse does
// not: an environment's objects go with it.)
type CRDInstallOptions struct {
	// Paths are directories or files of CRDs, as Options.CRDDirectoryPaths.
	Paths []string
	// CRDs are CRDs to install, as Options.CRDs.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// ErrorIfPathMissing is Options.ErrorIfCRDPathMissing.
	ErrorIfPathMissing bool
	// Scheme, when set, is used in place of Options.Scheme.
	Scheme *runtime.Scheme
}

// Environment is one running opemu server. Stop it with Stop (New does so in t.Cleanup).
type Environment struct {
	// Config talks to the server: plain HTTP on 127.0.0.1, no credentials needed (with
	// Options.RBAC, the admin's bearer token), QPS 1000 and Burst 2000 as envtest's. Each client made from it is the caller's to close.
	Config *rest.Config
	// KubeConfig is a kubeconfig for Config (for kubectl, or a process under test).
	KubeConfig []byte
	// CRDs are the CRDs installed: as they were given, but for their conversion, rewritten as
	// envtest rewrites it (see conversionWebhooks).
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// WebhookInstallOptions are Options.WebhookInstallOptions as prepared: the serving host,
	// port and certificate directory for the suite's webhook server, the CA its certificate
	// chains to, and the configurations installed (pointing at that host and port).
	WebhookInstallOptions WebhookInstallOptions

	app      *app.App
	opts     Options // as given to Start, for Fork
	stopOnce sync.Once
	stopErr  error
	cancel   context.CancelFunc
	done     chan error // Run's result
	cleanup  func() error
	// tokens authenticates the admin and AddUser's users (Options.RBAC); nil without RBAC.
	tokens *server.Tokens
	// caPEM is the CA of the server's certificate (Options.RBAC serves HTTPS); nil otherwise.
	caPEM []byte
}

// New starts an Environment for t and stops it when t and its subtests have completed (in
// t.Cleanup), failing t if it does not start or does not stop cleanly.
func New(t testing.TB, opts Options) *Environment {
	t.Helper()
	env, err := Start(t.Context(), opts)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("testenv: stop: %v", err)
		}
	})
	return env
}

// Start serves a new environment on a free port of 127.0.0.1 and returns once it answers,
// with every CRD of opts Established and every webhook configuration installed. ctx bounds the
// start only: the environment runs until Stop. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Environment, error) {
	crds, err := readCRDs(opts)
	if err != nil {
		return nil, err
	}
	env := &Environment{CRDs: crds, WebhookInstallOptions: opts.WebhookInstallOptions, opts: opts, cleanup: func() error { return nil }}
	converted := conversionWebhooks(crds, opts.scheme(), opts.WebhookInstallOptions.IgnoreSchemeConvertible)
	hooks, err := env.WebhookInstallOptions.prepare(len(converted) > 0)
	if err != nil {
		return nil, err
	}
	env.WebhookInstallOptions.pointConversions(converted)
	env.cleanup = env.WebhookInstallOptions.cleanup
	// From here on a failure removes what prepare made.
	ok := false
	defer func() {
		if !ok {
			_ = env.cleanup()
		}
	}()

	cfg := opts.Server
	cfg.Addr = ""
	cfg.EnableController = opts.Controller
	cfg.EnableCollector = true
	cfg.Logger = logger(opts)
	admin, caPEM, err := env.authentication(opts, &cfg)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	cfg.Objects = make([]any, 0, len(crds)+len(hooks)+len(opts.Server.Objects))
	for _, c := range crds {
		cfg.Objects = append(cfg.Objects, c)
	}
	cfg.Objects = append(append(cfg.Objects, hooks...), opts.Server.Objects...)
	ready := make(chan struct{})
	userReady := cfg.Ready
	cfg.Ready = func() {
		if userReady != nil {
			userReady()
		}
		close(ready)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	a, err := app.New(ctx, cfg)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("testenv: %w", err)
	}
	env.app = a
	runCtx, cancel := context.WithCancel(context.Background())
	env.cancel, env.done = cancel, make(chan error, 1)
	go func() { env.done <- a.Run(runCtx, ln) }()
	select {
	case <-ready:
	case err := <-env.done:
		cancel()
		if err == nil {
			err = errors.New("the server stopped while starting")
		}
		return nil, fmt.Errorf("testenv: %w", err)
	case <-ctx.Done():
		cancel()
		<-env.done
		return nil, fmt.Errorf("testenv: start: %w", ctx.Err())
	}
	host := "http://" + ln.Addr().String()
	if cfg.TLS != nil {
		host = "https://" + ln.Addr().String()
	}
	env.Config = &rest.Config{Host: host, QPS: 1000, Burst: 2000, BearerToken: admin, TLSClientConfig: rest.TLSClientConfig{CAData: caPEM}}
	env.KubeConfig = kubeConfig(host, admin, caPEM)
	ok = true
	return env, nil
}

// Stop stops the server and waits until every goroutine it ran has returned and its port is
// closed, then removes the certificate directory Start made. Watches are ended and in-flight
// requests finish (bounded, as the binary's shutdown: 4 s). Stop is idempotent; later calls
// return the first one's result.
func (e *Environment) Stop() error {
	e.stopOnce.Do(func() {
		e.cancel()
		select {
		case e.stopErr = <-e.done:
		case <-time.After(10 * time.Second):
			e.stopErr = errors.New("testenv: the server did not stop within 10s")
		}
		if err := e.cleanup(); err != nil && e.stopErr == nil {
			e.stopErr = fmt.Errorf("testenv: %w", err)
		}
	})
	return e.stopErr
}

// logger is the server's logger for opts.
func logger(opts Options) *slog.Logger {
	switch {
	case opts.Logger != nil:
		return opts.Logger
	case opts.AttachControlPlaneOutput || os.Getenv("KUBEBUILDER_ATTACH_CONTROL_PLANE_OUTPUT") == "true":
		return slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	return slog.New(slog.DiscardHandler)
}

// kubeConfig is a kubeconfig for the server at host (context testenv, namespace default),
// with token as the user's credentials and caPEM as the server's CA when not empty.
func kubeConfig(host, token string, caPEM []byte) []byte {
	user := "{}"
	if token != "" {
		user = "{token: " + token + "}"
	}
	ca := ""
	if len(caPEM) > 0 {
		ca = "\n    certificate-authority-data: " + base64.StdEncoding.EncodeToString(caPEM)
	}
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: testenv
  cluster:
    server: %s%s
contexts:
- name: testenv
  context:
    cluster: testenv
    user: testenv
    namespace: default
current-context: testenv
users:
- name: testenv
  user: %s
`, host, ca, user)
}
