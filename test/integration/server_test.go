package integration

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/internal/command"
	"github.com/opemu/opemu/test/internal/kubectl"
)

// server is an opemu server running in the test's process.
type server struct {
	t *testing.T
	// addr is the host:port it listens on.
	addr     string
	cancel   context.CancelFunc
	done     chan error // Run's result
	stopOnce sync.Once
	stopErr  error
	logs     *logBuffer
}

// start serves, in this process, the server the opemu binary would serve with the settings env
// ("NAME=value", SPEC §1; the binary's defaults for the others), on ADDR when one is given and
// on a free port of 127.0.0.1 otherwise. It returns once the server is wired and its listener
// open (app.Config.Ready), and stops it when t ends; its log is printed if t fails.
func start(t *testing.T, env ...string) *server {
	t.Helper()
	settings := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		require.True(t, ok, "a setting is NAME=value: %q", kv)
		settings[k] = v
	}
	cfg, err := command.Config(nil, func(k string) (string, bool) { v, ok := settings[k]; return v, ok })
	require.NoError(t, err)
	addr := "127.0.0.1:0"
	if a, ok := settings["ADDR"]; ok {
		addr = a
	}
	s := &server{t: t, done: make(chan error, 1), logs: &logBuffer{}}
	cfg.Logger = slog.New(slog.NewTextHandler(s.logs, nil))
	t.Cleanup(func() {
		if err := s.stop(); err != nil {
			t.Errorf("stopping the server: %v", err)
		}
		if t.Failed() {
			t.Logf("the server's log:\n%s", s.logs)
		}
	})
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	ln, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	s.addr = ln.Addr().String()
	a, err := app.New(context.Background(), cfg)
	if err != nil {
		_ = ln.Close()
		require.NoError(t, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- a.Run(ctx, ln) }()
	select {
	case <-ready:
	case err := <-s.done:
		s.done <- err // for stop
		require.NoError(t, err, "the server stopped while starting")
		t.Fatal("the server stopped while starting")
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not start within 10s")
	}
	return s
}

// stop stops the server and waits until Run has returned (every goroutine it started has, and
// the port is closed), at most 10 s; it fails only if Run has not returned by then. Run's own
// error is logged: a shutdown that outlasts its 4 s bound returns one (net/http waits up to 5 s
// for a connection a client opened without sending a request, as browsers and client-go's
// transport do), and shutdown is not what these tests check (test/e2e does, on the binary). It
// is idempotent: later calls return the first's result.
func (s *server) stop() error {
	s.stopOnce.Do(func() {
		if s.cancel == nil {
			return // it never ran
		}
		s.cancel()
		select {
		case err := <-s.done:
			if err != nil {
				s.t.Logf("the server stopped with: %v", err)
			}
		case <-time.After(10 * time.Second):
			s.stopErr = errors.New("the server did not stop within 10s")
		}
	})
	return s.stopErr
}

// url is the server's URL for path.
func (s *server) url(path string) string { return "http://" + s.addr + path }

// restConfig is client-go's configuration for the server.
func (s *server) restConfig() *rest.Config {
	return &rest.Config{Host: s.url(""), QPS: 1000, Burst: 1000}
}

// kubeconfig is what `opemu kubeconfig` prints for the server.
func (s *server) kubeconfig(t *testing.T) []byte {
	t.Helper()
	kc, _ := kubeconfig(t, nil, "--server", s.url(""))
	return kc
}

// kubectl is kubectl pointed at the server with the kubeconfig `opemu kubeconfig` prints.
func (s *server) kubectl(t *testing.T) *kubectl.Kubectl {
	t.Helper()
	return kubectl.New(t, s.kubeconfig(t))
}

// kubeconfig runs `opemu kubeconfig` with args and env (in this process) and returns what it
// prints on its standard output and on its standard error (its warnings).
func kubeconfig(t *testing.T, env []string, args ...string) (kc []byte, warnings string) {
	t.Helper()
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	var stdout, stderr bytes.Buffer
	code := command.Run("test", append([]string{"kubeconfig"}, args...), func(k string) (string, bool) { v, ok := vars[k]; return v, ok }, &stdout, &stderr)
	require.Equal(t, 0, code, "opemu kubeconfig: %s", stderr.String())
	return stdout.Bytes(), stderr.String()
}

// logBuffer is a server's log; written by the server's goroutines while it runs.
type logBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
