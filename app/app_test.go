package app_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/opemu/opemu/app"
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
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := goleak.IgnoreCurrent()
			cfg := tc.cfg
			cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
			ready := make(chan struct{})
			cfg.Ready = func() { close(ready) }
			a, err := app.New(cfg)
			require.NoError(t, err)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- a.Run(ctx, ln) }()
			<-ready
			resp, err := http.Get("http://" + ln.Addr().String() + "/healthz")
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)

			cancel()
			select {
			case err := <-done:
				require.NoError(t, err)
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return within 10s")
			}
			http.DefaultClient.CloseIdleConnections()
			goleak.VerifyNone(t, before)
			_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
			assert.Error(t, err, "the listener is closed")
		})
	}
}
