package server_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStarting: while a replica waits for etcd its listener answers the probes (alive, not
// ready, naming etcd) and every other request with a 503 Status; once stopped, the same
// listener serves what comes next, and no starting answer is given any more.
func TestStarting(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	stop, err := server.Starting(ln, server.StartingConfig{Waiting: "etcd"})
	require.NoError(t, err)
	base := "http://" + ln.Addr().String()
	client := &http.Client{Timeout: 5 * time.Second}
	get := func(path string) (int, string, http.Header) {
		t.Helper()
		resp, err := client.Get(base + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), resp.Header
	}

	code, body, _ := get("/healthz")
	assert.Equal(t, http.StatusOK, code)
	assert.JSONEq(t, `{"status":"healthy"}`, body)
	code, _, _ = get("/livez")
	assert.Equal(t, http.StatusOK, code)
	code, body, _ = get("/readyz")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	var ready map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &ready))
	assert.Equal(t, "not ready", ready["status"])
	assert.Contains(t, ready["reason"], "waiting for etcd")
	code, body, _ = get("/readyz?verbose")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body, "[-]etcd failed: reason withheld")
	code, body, h := get("/api/v1/namespaces/default/configmaps")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "1", h.Get("Retry-After"))
	var st map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &st))
	assert.Equal(t, "Status", st["kind"])
	assert.Equal(t, "ServiceUnavailable", st["reason"])

	done := make(chan struct{})
	go func() { stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("stop did not return within 5 s")
	}
	next := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "wired") })}
	go func() { _ = next.Serve(ln) }()
	t.Cleanup(func() { next.Close() })
	code, body, _ = get("/readyz")
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.HasPrefix(body, "wired"), "the listener now serves the wired server: %s", body)
}
