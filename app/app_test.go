package app_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/hooks"
	"github.com/opemu/opemu/leader"
)

// TestRunReleasesEverything: Run returns once every goroutine the server started has returned
// and its listener is closed, with each part that runs its own goroutines switched on: the
// controller, leader election over either backend, a manual clock. Not parallel: the check
// compares against the goroutines from before.
func TestRunReleasesEverything(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  app.Config
	}{
		{"API only", app.Config{}},
		{"controller", app.Config{EnableController: true}},
		{"controller, election in memory", app.Config{EnableController: true, EnableLeaderElection: true, LeaseBackend: leader.BackendMemory, RetryPeriod: 50 * time.Millisecond}},
		{"controller, election by file", app.Config{EnableController: true, EnableLeaderElection: true, LeaseBackend: leader.BackendFile, LeaseFile: filepath.Join(t.TempDir(), "lease"), RetryPeriod: 50 * time.Millisecond}},
		{"manual clock", app.Config{EnableController: true, Clock: app.NewManualClock(time.Now())}},
		{"nodes and the cluster's controllers", app.Config{Nodes: 3, EnableCollector: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			cfg := tc.cfg
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			base, stop := start(t, cfg)
			resp, err := http.Get(base + "/healthz")
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)

			require.NoError(t, stop())
			http.DefaultClient.CloseIdleConnections()
			goleak.VerifyNone(t, before)
			_, err = net.DialTimeout("tcp", strings.TrimPrefix(base, "http://"), time.Second)
			assert.Error(t, err, "the listener is closed")
		})
	}
}

// TestNewBoundedByItsContext: a cancelled ctx fails New with ctx's error (not only the write
// path's 504 for the bootstrap write it cut short), and leaves nothing running.
func TestNewBoundedByItsContext(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := app.New(ctx, app.Config{EnableController: true, Logger: slog.New(slog.DiscardHandler)})
	require.ErrorIs(t, err, context.Canceled)
	goleak.VerifyNone(t, before)
}

// TestBuiltInControllerNamesAreReserved: a Controller object (SPEC §15) may take none of the
// built-in controllers' names, which name their queues in /controller and the metrics: each
// is Invalid, saying why.
func TestBuiltInControllerNamesAreReserved(t *testing.T) {
	t.Parallel()
	names := []string{"application", "deployment", "replicaset", "statefulset", "daemonset", "job"}
	cfg := app.Config{EnableController: true, Logger: slog.New(slog.DiscardHandler)}
	for _, name := range names {
		cfg.Objects = append(cfg.Objects, map[string]any{
			"apiVersion": "controllers.opemu.dev/v1", "kind": "Controller", "metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"resource": map[string]any{"group": "", "version": "v1", "plural": "configmaps"},
				"hook":     map[string]any{"url": "http://127.0.0.1:9/reconcile"},
			},
		})
	}
	base := serve(t, cfg)
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			var ctrl struct {
				Status struct {
					Phase      string `json:"phase"`
					Conditions []struct {
						Type    string `json:"type"`
						Message string `json:"message"`
					} `json:"conditions"`
				} `json:"status"`
			}
			require.EventuallyWithT(t, func(c *assert.CollectT) {
				resp, err := http.Get(base + "/apis/controllers.opemu.dev/v1/controllers/" + name)
				require.NoError(c, err)
				defer resp.Body.Close()
				require.NoError(c, json.NewDecoder(resp.Body).Decode(&ctrl))
				assert.Equal(c, hooks.PhaseInvalid, ctrl.Status.Phase)
			}, 10*time.Second, 10*time.Millisecond)
			require.NotEmpty(t, ctrl.Status.Conditions)
			assert.Contains(t, ctrl.Status.Conditions[0].Message, "taken by opemu's built-in controller")
		})
	}
}

// serve runs a server of cfg on a free loopback port until t ends and returns its URL.
func serve(t *testing.T, cfg app.Config) string {
	t.Helper()
	base, stop := start(t, cfg)
	t.Cleanup(func() { assert.NoError(t, stop()) })
	return base
}

// start runs a server of cfg on a free loopback port and returns its URL, once it serves, and
// stop, which ends Run and returns its error (failing t if Run does not return within 10 s).
func start(t *testing.T, cfg app.Config) (base string, stop func() error) {
	t.Helper()
	ready := make(chan struct{})
	cfg.Ready = func() { close(ready) }
	a, err := app.New(t.Context(), cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx, ln) }()
	stop = func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not return within 10s")
			return nil
		}
	}
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	return "http://" + ln.Addr().String(), stop
}
