package e2e

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// The binary as it starts, serves, reconciles and stops, configured through its environment.

func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	p := start(t)
	first, _, _ := strings.Cut(p.logs(), "\n")
	assert.Contains(t, first, "dashboard=http://"+p.addr+"/ui/", "the first log line leads to the dashboard")
	resp, err := http.Get("http://" + p.addr + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"status":"healthy"}`, string(body))

	// resource_count follows the store.
	create, err := http.Post("http://"+p.addr+"/apis/cloudnative.elide.dev/v1/namespaces/default/applications", "application/json",
		strings.NewReader(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"a"},"spec":{"replicas":1,"image":"nginx:1"}}`))
	require.NoError(t, err)
	create.Body.Close()
	require.Equal(t, http.StatusCreated, create.StatusCode)
	m, err := http.Get("http://" + p.addr + "/metrics")
	require.NoError(t, err)
	metricsBody, _ := io.ReadAll(m.Body)
	m.Body.Close()
	assert.Contains(t, string(metricsBody), `resource_count{kind="Application",namespace="default"} 1`)
	assert.Contains(t, string(metricsBody), `resource_count{kind="Namespace",namespace=""} 4`, "the system namespaces")
	assert.Contains(t, string(metricsBody), `resource_count{kind="Node",namespace=""} 1`, "NODES=1")

	// An open watch must not hold shutdown up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/watch", nil)
	watch, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer watch.Body.Close()

	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, p.wait(t, 5*time.Second), "exit code after SIGTERM; stderr:\n%s", p.logs())
	assert.Less(t, time.Since(start), 5*time.Second)
	_, err = io.ReadAll(watch.Body)
	assert.NoError(t, err, "the watch should end cleanly, not be cut")
}

func TestBinaryRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, env, want string }{
		{"duration", "LEASE_DURATION=soon", "invalid LEASE_DURATION"},
		{"port", "PORT=-1", "invalid PORT"},
		{"log format", "LOG_FORMAT=xml", "invalid LOG_FORMAT"},
		{"allowed origin", "ALLOWED_ORIGINS=*", "invalid ALLOWED_ORIGINS"},
		{"TLS", "TLS=on", "invalid TLS"},
		{"missing token file", "TOKEN_FILE=/nonexistent/tokens.csv", "invalid TOKEN_FILE"},
		{"missing certificate", "TLS_CERT_FILE=/nonexistent/c.pem\x00TLS_KEY_FILE=/nonexistent/k.pem", "invalid TLS_CERT_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binary)
			cmd.Env = append(os.Environ(), strings.Split(tt.env, "\x00")...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "want a non-zero exit, got %v", err)
			assert.Equal(t, 2, exit.ExitCode())
			assert.Contains(t, string(out), tt.want)
			assert.True(t, strings.HasPrefix(string(out), "opemu: "))
		})
	}
}

func TestBinaryReconcilesApplications(t *testing.T) {
	t.Parallel()
	p := start(t, "ROLLOUT_STEP=0")
	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _ := request.JSON(t, "POST", api, request.AppJSON)
	require.Equal(t, http.StatusCreated, code)
	require.Eventually(t, func() bool {
		_, obj := request.JSON(t, "GET", api+"/web", "")
		st, _ := obj["status"].(map[string]any)
		return st["phase"] == "Running"
	}, 10*time.Second, 20*time.Millisecond)
	code, _ = request.JSON(t, "POST", api+"/web/reconcile", "")
	assert.Equal(t, http.StatusAccepted, code)
	_, h := request.JSON(t, "GET", api+"/web/history", "")
	assert.NotEmpty(t, h["items"])
	m, err := http.Get("http://" + p.addr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	for _, want := range []string{
		`resource_phase_count{kind="Application",phase="Running"} 1`,
		`controller_reconcile_total{controller="application",result="success"}`,
		`workqueue_adds_total{name="application"}`,
		`event_total{severity="Info",type="Normal"}`,
	} {
		assert.Contains(t, string(body), want)
	}
}

func TestBinaryWithoutController(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false", "ROLLOUT_STEP=0")
	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _ := request.JSON(t, "POST", api, request.AppJSON)
	require.Equal(t, http.StatusCreated, code)
	code, _ = request.JSON(t, "POST", api+"/web/reconcile", "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	// Give a controller, were there one, ample time; nothing may touch the object.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		_, obj := request.JSON(t, "GET", api+"/web", "")
		require.Nil(t, obj["status"], "no controller writes status")
		require.Nil(t, obj["metadata"].(map[string]any)["finalizers"])
	}
}
