package server_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// following is election under way elsewhere: this process does not lead.
type following struct{}

func (following) IsLeader() bool { return false }
func (following) Leader() string { return "other" }
func (following) Lease() any     { return nil }

// text asserts r is a plain-text answer with code and body, as kube-apiserver's health
// endpoints write them.
func text(t *testing.T, r response, code int, body string) {
	t.Helper()
	assert.Equal(t, code, r.code)
	assert.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
	assert.Equal(t, body, string(r.body))
}

// TestHealthChecks: /livez answers kube-apiserver's "ok"; ?verbose lists each endpoint's checks
// in kube-apiserver's text, ?exclude skips one, /<endpoint>/<check> runs one.
func TestHealthChecks(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	text(t, e.do("GET", "/livez", "", ""), 200, "ok")
	text(t, e.do("GET", "/livez?verbose", "", ""), 200, "[+]ping ok\nlivez check passed\n")
	text(t, e.do("GET", "/healthz?verbose=1", "", ""), 200, "[+]ping ok\nhealthz check passed\n")
	text(t, e.do("GET", "/readyz?verbose", "", ""), 200, "[+]ping ok\n[+]leader ok\n[+]shutdown ok\nreadyz check passed\n")
	text(t, e.do("GET", "/readyz?verbose&exclude=leader&exclude=nothing", "", ""), 200,
		"[+]ping ok\n[+]leader excluded: ok\n[+]shutdown ok\nwarn: some health checks cannot be excluded: no matches for \"nothing\"\nreadyz check passed\n")
	text(t, e.do("GET", "/readyz/ping", "", ""), 200, "ok")
	text(t, e.do("GET", "/livez/ping", "", ""), 200, "ok")
	text(t, e.do("GET", "/readyz/nothing", "", ""), 404, "404 page not found\n")
	text(t, e.do("GET", "/livez/shutdown", "", ""), 404, "404 page not found\n")
	// Without ?verbose, /healthz and /readyz keep opemu's JSON (SPEC §4.1).
	assert.JSONEq(t, `{"status":"healthy"}`, string(e.do("GET", "/healthz", "", "").body))

	e.srv.BeginShutdown()
	text(t, e.do("GET", "/readyz?verbose", "", ""), 503, "[+]ping ok\n[+]leader ok\n[-]shutdown failed: reason withheld\nreadyz check failed\n")
	text(t, e.do("GET", "/readyz/shutdown", "", ""), 503, "internal server error: the server is shutting down")
	text(t, e.do("GET", "/livez", "", ""), 200, "ok")
	r := e.do("GET", "/readyz", "", "")
	assert.Equal(t, 503, r.code)
	assert.Equal(t, map[string]any{"status": "not ready", "isLeader": true, "leader": "opemu"}, r.json(t))
}

// TestReadinessChecksFail: a store that does not answer fails the etcd check (its reason in the
// JSON, withheld in the text); a follower with a controller fails the leader check.
func TestReadinessChecksFail(t *testing.T) {
	t.Parallel()
	down := newEnv(t, func(c *server.Config, _ *cache.Config) {
		c.StoreHealth = func(context.Context) error { return errors.New("etcd: context deadline exceeded") }
	})
	text(t, down.do("GET", "/readyz?verbose", "", ""), 503, "[+]ping ok\n[-]etcd failed: reason withheld\n[+]leader ok\n[+]shutdown ok\nreadyz check failed\n")
	r := down.do("GET", "/readyz", "", "")
	require.Equal(t, 503, r.code)
	assert.Equal(t, "etcd: context deadline exceeded", r.json(t)["reason"])
	text(t, down.do("GET", "/healthz?verbose", "", ""), 200, "[+]ping ok\nhealthz check passed\n")

	follower := newEnv(t, func(c *server.Config, _ *cache.Config) {
		c.Leader, c.Controller = following{}, &fakeController{}
	})
	text(t, follower.do("GET", "/readyz?verbose", "", ""), 503, "[+]ping ok\n[-]leader failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n")
	r = follower.do("GET", "/readyz", "", "")
	require.Equal(t, http.StatusServiceUnavailable, r.code)
	assert.Equal(t, map[string]any{"status": "not ready", "isLeader": false, "leader": "other"}, r.json(t))
}
