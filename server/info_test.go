package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/server"
	"github.com/opemu/opemu/webhooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProductRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root := e.do("GET", "/", "", "")
	require.Equal(t, http.StatusOK, root.code)
	m := root.json(t)
	assert.Equal(t, "opemu", m["name"])
	assert.Equal(t, true, m["isLeader"])
	assert.NotEmpty(t, m["features"])
	assert.Contains(t, m["resources"], "cloudnative.elide.dev/v1/applications")
	assert.NotEmpty(t, m["endpoints"])

	h := e.do("GET", "/healthz", "", "")
	assert.Equal(t, http.StatusOK, h.code)
	assert.JSONEq(t, `{"status":"healthy"}`, string(h.body))

	r := e.do("GET", "/readyz", "", "")
	assert.Equal(t, http.StatusOK, r.code)
	assert.JSONEq(t, `{"status":"ready","isLeader":true,"leader":"opemu"}`, string(r.body))

	l := e.do("GET", "/leader", "", "").json(t)
	assert.Equal(t, true, l["isLeader"])
	assert.Equal(t, false, l["electionEnabled"])

	c := e.do("GET", "/crd", "", "").json(t)
	assert.Equal(t, "CustomResourceDefinition", c["kind"])
	assert.Equal(t, "applications.cloudnative.elide.dev", field(c, "metadata", "name"))
	versions := field(c, "spec", "versions").([]any)
	assert.NotNil(t, field(versions[0].(map[string]any), "schema", "openAPIV3Schema"))

	cs := e.do("GET", "/crds", "", "").json(t)
	var crds []any
	for _, c := range cs["items"].([]any) {
		crds = append(crds, field(c.(map[string]any), "metadata", "name"))
	}
	assert.Equal(t, []any{"applications.cloudnative.elide.dev", "controllers.controllers.opemu.dev", "faults.faults.opemu.dev"}, crds, "the built-in CRDs")

	// Shutdown turns readiness off at once.
	e.srv.BeginShutdown()
	nr := e.do("GET", "/readyz", "", "")
	assert.Equal(t, http.StatusServiceUnavailable, nr.code)
	assert.Equal(t, "not ready", nr.json(t)["status"])
}

const readmeReview = `{
  "apiVersion": "admission.k8s.io/v1",
  "kind": "AdmissionReview",
  "request": {
    "uid": "test-123",
    "kind": {"group": "cloudnative.elide.dev", "version": "v1", "kind": "Application"},
    "resource": {"group": "cloudnative.elide.dev", "version": "v1", "resource": "applications"},
    "operation": "CREATE",
    "userInfo": {"username": "admin"},
    "object": {
      "apiVersion": "cloudnative.elide.dev/v1",
      "kind": "Application",
      "metadata": {"name": "test"},
      "spec": {"replicas": 3, "image": "nginx:latest"}
    }
  }
}`

func TestAdmissionReviewEndpoints(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v := e.do("POST", "/validate", "application/json", readmeReview)
	require.Equal(t, http.StatusOK, v.code, "body: %s", v.body)
	resp := v.json(t)
	assert.Equal(t, "AdmissionReview", resp["kind"])
	assert.Equal(t, "test-123", field(resp, "response", "uid"))
	assert.Equal(t, true, field(resp, "response", "allowed"))
	assert.Len(t, field(resp, "response", "warnings"), 2)

	denied := e.do("POST", "/validate", "application/json", strings.Replace(readmeReview, "nginx:latest", "ubuntu:22.04", 1)).json(t)
	assert.Equal(t, false, field(denied, "response", "allowed"))
	assert.EqualValues(t, 403, field(denied, "response", "status", "code"))

	over := e.do("POST", "/validate", "application/json", strings.Replace(readmeReview, `"replicas": 3`, `"replicas": 150`, 1)).json(t)
	assert.Equal(t, false, field(over, "response", "allowed"))
	assert.Contains(t, field(over, "response", "status", "message"), "replicas must be <= 100")

	mu := e.do("POST", "/mutate", "application/json", readmeReview).json(t)
	assert.Equal(t, true, field(mu, "response", "allowed"))
	assert.Equal(t, "JSONPatch", field(mu, "response", "patchType"))
	assert.NotEmpty(t, field(mu, "response", "patch"))

	status(t, e.do("POST", "/validate", "application/json", `{"kind":`), 400, "BadRequest")
	status(t, e.do("POST", "/mutate", "application/json", `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), 400, "BadRequest")
}

func TestMetricsMove(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("a", 1, "nginx:1")).code)
	w := e.watch("", nil)
	<-w.frames
	body := string(e.do("GET", "/metrics", "", "").body)
	for _, want := range []string{
		`apiserver_request_total{code="201",resource="applications",verb="POST"} 1`,
		`apiserver_request_duration_seconds_count{resource="applications",verb="POST"} 1`,
		`webhook_requests_total{allowed="true",operation="CREATE",webhook="defaulter"} 1`,
		`webhook_duration_seconds_count{webhook="security-policy"} 1`,
		`watch_clients{protocol="sse"} 1`,
		`process_start_time_seconds`,
	} {
		assert.Contains(t, body, want)
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.MaxBody = 1024 })
	big := app("big", 1, "nginx:"+strings.Repeat("1", 2000))
	status(t, e.do("POST", appsPath, "application/json", big), http.StatusRequestEntityTooLarge, "RequestEntityTooLarge")
}

// TestMaxInflight holds the only slot with a request whose body never finishes, then expects
// 429 with Retry-After for the next one.
func TestMaxInflight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.MaxInflight = 1 })
	pr, pw := io.Pipe()
	req, err := http.NewRequest("POST", e.http.URL+appsPath, pr)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	var wg sync.WaitGroup
	wg.Go(func() {
		resp, err := e.http.Client().Do(req)
		if err == nil {
			resp.Body.Close()
		}
	})
	_, err = pw.Write([]byte(`{"apiVersion":`))
	require.NoError(t, err)
	var r response
	require.Eventually(t, func() bool {
		r = e.do("GET", "/healthz", "", "")
		return r.code == http.StatusTooManyRequests
	}, 5*time.Second, 10*time.Millisecond)
	status(t, r, http.StatusTooManyRequests, "TooManyRequests")
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	pw.Close()
	wg.Wait()
	assert.Equal(t, http.StatusOK, e.do("GET", "/healthz", "", "").code, "the slot is free again")
}

// TestPanicIsAStatus: a handler that panics answers 500 with an InternalError Status, and the
// server goes on serving.
func TestPanicIsAStatus(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) {
		c.Admission = &webhooks.Chain{Mutating: []webhooks.Named{{Name: "broken", Handler: webhooks.HandlerFunc(
			func(_ context.Context, req *webhooks.Request) webhooks.Response {
				if req.Resource.Resource == "applications" {
					panic("broken webhook")
				}
				return webhooks.Allowed()
			})}}}
	})
	m := status(t, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1")), http.StatusInternalServerError, "InternalError")
	assert.Contains(t, m["message"], "broken webhook")
	status(t, e.do("GET", appsPath+"/web", "", ""), http.StatusNotFound, "NotFound")
}

// TestInvalidUTF8InThePath: a resource name that is not UTF-8 (found by FuzzGuard) gets its
// 404 Status; it used to panic in the request metrics and drop the connection.
func TestInvalidUTF8InThePath(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"/api/v1/%AC", "/api/v1/%AC/x", "/apis/cloudnative.elide.dev/v1/namespaces/default/applications/x/%FF"} {
		status(t, e.do("GET", path, "", ""), http.StatusNotFound, "NotFound")
	}
}

// TestRootSendsBrowsersToTheDashboard: / answers curl with what the server is (the dashboard
// among its endpoints) and sends a browser to /ui/; with tokens, a browser without
// credentials goes to the login, as for the dashboard's page.
func TestRootSendsBrowsersToTheDashboard(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	curl := e.send(req{method: "GET", path: "/", header: map[string]string{"Accept": "*/*"}})
	require.Equal(t, http.StatusOK, curl.code)
	assert.Equal(t, "/ui/", curl.json(t)["endpoints"].(map[string]any)["dashboard"])
	assert.Equal(t, "Accept", curl.header.Get("Vary"))
	browser := e.send(req{method: "GET", path: "/", header: map[string]string{
		"Accept": "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"}})
	require.Equal(t, http.StatusFound, browser.code)
	assert.Equal(t, "/ui/", browser.header.Get("Location"))

	withTokens := newEnv(t, withTokens(t))
	r := withTokens.send(req{method: "GET", path: "/", header: map[string]string{"Accept": "text/html"}})
	require.Equal(t, http.StatusSeeOther, r.code)
	assert.Equal(t, "/ui/login", r.header.Get("Location"))
	status(t, withTokens.send(req{method: "GET", path: "/", header: map[string]string{"Accept": "application/json"}}), 401, "Unauthorized")
}
