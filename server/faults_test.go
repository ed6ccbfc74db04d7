package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const faultsPath = "/apis/faults.opemu.dev/v1/faults"

// fault creates the Fault name from spec (YAML) and waits until the engine applies it.
func (e *env) fault(name, spec string) {
	e.t.Helper()
	var s map[string]any
	require.NoError(e.t, yaml.Unmarshal([]byte(spec), &s))
	body, _ := json.Marshal(map[string]any{"apiVersion": "faults.opemu.dev/v1", "kind": "Fault", "metadata": map[string]any{"name": name}, "spec": s})
	r := e.do("POST", faultsPath, "application/json", string(body))
	require.Equal(e.t, http.StatusCreated, r.code, "%s", r.body)
	require.Eventually(e.t, func() bool { return e.faultStatus(name)["phase"] == "Active" }, 5*time.Second, 5*time.Millisecond)
}

func (e *env) faultStatus(name string) map[string]any {
	e.t.Helper()
	r := e.do("GET", faultsPath+"/"+name, "", "")
	require.Equal(e.t, http.StatusOK, r.code, "%s", r.body)
	var f struct {
		Status map[string]any `json:"status"`
	}
	require.NoError(e.t, json.Unmarshal(r.body, &f))
	return f.Status
}

// waitInjected waits until the Fault name's status counts n injections.
func (e *env) waitInjected(name string, n int) {
	e.t.Helper()
	require.Eventually(e.t, func() bool {
		v, _ := e.faultStatus(name)["injected"].(float64)
		return int(v) == n
	}, 5*time.Second, 5*time.Millisecond, "status.injected of %s should reach %d", name, n)
}

// TestFaultErrors: each injected error is a Status saying so, with Retry-After where it
// applies, answered before the write path: nothing stored changes.
func TestFaultErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1.27")).code)
	before := e.do("GET", appsPath+"/web", "", "").json(t)

	e.fault("status-conflicts", `{match: {verbs: [update, patch], resource: applications, subresource: status, name: web}, action: {status: 409}}`)
	e.fault("no-api", `{match: {verbs: [create], name: ""}, action: {status: 500, message: "disk full"}}`)
	e.fault("throttle", `{match: {verbs: [list], group: cloudnative.elide.dev}, action: {status: 429, retryAfterSeconds: 2}}`)
	e.fault("unavailable", `{match: {verbs: [delete]}, action: {status: 503}}`)

	withStatus := before
	withStatus["status"] = map[string]any{"phase": "Running"}
	body, _ := json.Marshal(withStatus)
	r := e.do("PUT", appsPath+"/web/status", "application/json", string(body))
	m := status(t, r, http.StatusConflict, "Conflict")
	assert.Equal(t, `Operation cannot be fulfilled on applications.cloudnative.elide.dev "web": injected by Fault "status-conflicts" (faults.opemu.dev): the request was not carried out`, m["message"])
	assert.Equal(t, "web", field(m, "details", "name"))
	assert.Empty(t, r.header.Get("Retry-After"))

	r = e.do("POST", appsPath, "application/json", app("api", 1, "nginx:1.27"))
	m = status(t, r, http.StatusInternalServerError, "InternalError")
	assert.Contains(t, m["message"], `injected by Fault "no-api" (faults.opemu.dev): the request was not carried out: disk full`)

	r = e.do("GET", appsPath, "", "")
	m = status(t, r, http.StatusTooManyRequests, "TooManyRequests")
	assert.Equal(t, "2", r.header.Get("Retry-After"))
	assert.EqualValues(t, 2, field(m, "details", "retryAfterSeconds"))

	r = e.do("DELETE", appsPath+"/web", "", "")
	status(t, r, http.StatusServiceUnavailable, "ServiceUnavailable")
	assert.Equal(t, "1", r.header.Get("Retry-After"), "503 defaults to Retry-After: 1")

	// Nothing stored changed: the status write, the create and the delete never happened.
	after := e.do("GET", appsPath+"/web", "", "").json(t)
	assert.Equal(t, field(before, "metadata", "resourceVersion"), field(after, "metadata", "resourceVersion"))
	assert.Nil(t, after["status"])
	assert.Equal(t, http.StatusNotFound, e.do("GET", appsPath+"/api", "", "").code)

	// Requests the Faults do not match, and routes no Fault applies to, are served.
	assert.Equal(t, http.StatusOK, e.do("GET", appsPath+"/web", "", "").code)
	assert.Equal(t, http.StatusOK, e.do("GET", "/apis/cloudnative.elide.dev/v1", "", "").code, "discovery")
	assert.Equal(t, http.StatusOK, e.do("GET", appsPath+"/web/history", "", "").code)
	assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/namespaces", "", "").code, "another group")

	for name, n := range map[string]int{"status-conflicts": 1, "no-api": 1, "throttle": 1, "unavailable": 1} {
		e.waitInjected(name, n)
	}
	metrics := string(e.do("GET", "/metrics", "", "").body)
	assert.Contains(t, metrics, `faults_injected_total{fault="throttle"} 1`)
	assert.Contains(t, metrics, `apiserver_request_total{code="409",resource="applications/status",verb="PUT"} 1`)
}

// TestFaultsNeverBlockTheirOwnRemoval: a Fault matching every request still lets Faults be
// read and deleted, and deleting it turns it off.
func TestFaultsNeverBlockTheirOwnRemoval(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fault("everything", `{action: {status: 503}}`)
	status(t, e.do("GET", appsPath, "", ""), http.StatusServiceUnavailable, "ServiceUnavailable")
	assert.Equal(t, http.StatusOK, e.do("GET", faultsPath, "", "").code)
	require.Equal(t, http.StatusOK, e.do("DELETE", faultsPath+"/everything", "", "").code)
	require.Eventually(t, func() bool { return e.do("GET", appsPath, "", "").code == http.StatusOK }, 5*time.Second, 5*time.Millisecond)
}

// TestFaultDelay: a delay holds the answer; one past the request's deadline is a 504.
func TestFaultDelay(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.RequestTimeout = 300 * time.Millisecond })
	e.fault("slow-lists", `{match: {verbs: [list]}, action: {delay: 150ms}}`)
	e.fault("stuck-gets", `{match: {verbs: [get], resource: applications}, action: {delay: 1h}}`)
	start := time.Now()
	assert.Equal(t, http.StatusOK, e.do("GET", appsPath, "", "").code)
	assert.GreaterOrEqual(t, time.Since(start), 150*time.Millisecond)
	m := status(t, e.do("GET", appsPath+"/web", "", ""), http.StatusGatewayTimeout, "Timeout")
	assert.Contains(t, m["message"], `Fault "stuck-gets" delays it by 1h0m0s`)
	e.waitInjected("slow-lists", 1)

	// The deadline ended that request alone: a write on its keep-alive connection is served.
	// (A read deadline on a request without a body once cancelled the connection's context,
	// so every later request on it began cancelled: a slow GET /openapi/v2 under load made
	// the next DELETE a 500.)
	reused := false
	ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{GotConn: func(c httptrace.GotConnInfo) { reused = c.Reused }})
	req, err := http.NewRequestWithContext(ctx, "POST", e.http.URL+appsPath, strings.NewReader(app("after", 1, "nginx:1")))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := e.http.Client().Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.True(t, reused, "the write went over the timed-out request's connection")
	assert.Equal(t, http.StatusCreated, resp.StatusCode, "%s", body)
}

// TestFaultEndsKubernetesWatches: a watch Fault ends the stream after closeAfter, with a 410
// ERROR event when it expires it; each ended stream is counted.
func TestFaultEndsKubernetesWatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1.27")).code)
	e.fault("expire", `{match: {verbs: [watch], namespace: default}, action: {watch: {closeAfter: 100ms, expire: true}}, count: 1}`)
	e.fault("then-close", `{match: {verbs: [watch]}, action: {watch: {closeAfter: 100ms}}, count: 1}`)

	ks := e.kubeWatch(appsPath + "?watch=true")
	typ, obj := ks.next()
	assert.Equal(t, "ADDED", typ)
	assert.Equal(t, "web", field(obj, "metadata", "name"))
	typ, obj = ks.next()
	assert.Equal(t, "ERROR", typ)
	assert.EqualValues(t, 410, obj["code"])
	assert.Equal(t, "Expired", obj["reason"])
	assert.Contains(t, obj["message"], `injected by Fault "expire"`)
	require.True(t, ks.closed(), "then it ends")

	// count 1 is spent: the next watch meets the other Fault, which ends it without an error.
	ks = e.kubeWatch(appsPath + "?watch=true")
	typ, _ = ks.next()
	assert.Equal(t, "ADDED", typ)
	require.True(t, ks.closed(), "then it ends")
	e.waitInjected("expire", 1)
	e.waitInjected("then-close", 1)

	// Spent both: watches run on.
	ks = e.kubeWatch(appsPath + "?watch=true")
	ks.next()
	time.Sleep(200 * time.Millisecond) // twice closeAfter: the stream stays open
	select {
	case line, ok := <-ks.lines:
		t.Fatalf("the stream should stay open and quiet, got %q (open: %v)", line, ok)
	default:
	}
}

// TestFaultEndsSSEStreams: the SSE stream gets the ERROR frame (an empty id, a 410 Status).
func TestFaultEndsSSEStreams(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.fault("expire-sse", `{match: {verbs: [watch], resource: applications}, action: {watch: {closeAfter: 50ms, expire: true}}}`)
	c := e.watch("?kind=Application", nil)
	f, ok := c.next()
	require.True(t, ok)
	assert.True(t, f.hasID)
	assert.Empty(t, f.id)
	var ev watchEvent
	require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
	assert.Equal(t, "ERROR", ev.Type)
	assert.EqualValues(t, 410, ev.Object["code"])
	_, ok = c.next()
	assert.False(t, ok, "then closed")
	e.waitInjected("expire-sse", 1)

	// A stream over other kinds is not matched: it stays open, without an ERROR frame.
	other := e.watch("?kind=Event", nil)
	time.Sleep(150 * time.Millisecond) // three times closeAfter
drain:
	for {
		select {
		case f, ok := <-other.frames:
			require.True(t, ok, "the stream of Events stays open")
			assert.Empty(t, f.data)
		default:
			break drain
		}
	}
}

// TestFaultDelayedWatchesCount: a watch a Fault delays holds its place among MAX_WATCHES while
// it waits (before, delayed watches were held outside the limit: any number of them); the
// watch beyond is refused at once.
func TestFaultDelayedWatchesCount(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.MaxWatches = 2 })
	e.fault("stuck-watches", `{match: {verbs: [watch]}, action: {delay: 1h}}`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := make(chan error, 2)
	for _, path := range []string{"/watch", appsPath + "?watch=true"} {
		req, err := http.NewRequestWithContext(ctx, "GET", e.http.URL+path, nil)
		require.NoError(t, err)
		go func() {
			resp, err := e.http.Client().Do(req)
			if err == nil {
				resp.Body.Close()
			}
			held <- err
		}()
	}
	e.waitInjected("stuck-watches", 2)

	for _, path := range []string{"/watch", appsPath + "?watch=true"} {
		rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
		req, err := http.NewRequestWithContext(rctx, "GET", e.http.URL+path, nil)
		require.NoError(t, err)
		resp, err := e.http.Client().Do(req)
		require.NoError(t, err, "%s: the watch beyond MAX_WATCHES is answered at once, not delayed", path)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		rcancel()
		assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "%s: %s", path, body)
		assert.Contains(t, string(body), "too many watches")
	}
	assert.Equal(t, http.StatusOK, e.do("GET", appsPath, "", "").code, "lists are not watches")

	// The delayed watches leave: their places free.
	cancel()
	for range 2 {
		require.Error(t, <-held)
	}
	require.Equal(t, http.StatusOK, e.do("DELETE", faultsPath+"/stuck-watches", "", "").code)
	require.Eventually(t, func() bool {
		c := e.watch("", nil)
		defer c.cancel()
		return c.resp.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond)
}
