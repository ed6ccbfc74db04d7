package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/server"
	"github.com/opemu/opemu/webhooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
)

// timed runs one request and returns its answer and how long it took.
func (e *env) timed(method, path, contentType, body string) (response, time.Duration) {
	e.t.Helper()
	start := time.Now()
	r := e.do(method, path, contentType, body)
	return r, time.Since(start)
}

// deepJSON nests {"<key>": ...} depth times around {}.
func deepJSON(depth int, key string) string {
	return strings.Repeat(`{"`+key+`":`, depth) + "{}" + strings.Repeat("}", depth)
}

// TestHostileRequests is the matrix of requests that once took seconds to minutes or
// gigabytes: each must now be refused by a bound with the right Status, storing nothing. (How
// fast and in how much memory the built binary answers them is TestHostileRequestsInTime in
// the main package; here the race detector watches the same paths.)
func TestHostileRequests(t *testing.T) {
	t.Parallel()
	// Not the default 5 s: under the race detector on a loaded 2-core CI, the 9,000-deep create
	// took longer (a 504). Time is TestHostileRequestsInTime's to judge, without the detector.
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.RequestTimeout = 30 * time.Second })
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1")).code)
	// Custom resources whose schema keeps what they are sent: one with a long list (10,000
	// items, about 110 KB, atomic: its items are not owned one by one) for patches to work on,
	// and one nested 9,000 deep: creating it costs no more than its size.
	leases := "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	require.Equal(t, http.StatusCreated, e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/yaml", thingCRD).code)
	things := "/apis/example.com/v1/namespaces/default/things"
	items := make([]string, 10000)
	for i := range items {
		items[i] = fmt.Sprintf("x.io/f%d", i)
	}
	long := fmt.Sprintf(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"long"},"spec":{"items":%s}}`, mustMarshal(t, items))
	require.Equal(t, http.StatusCreated, e.do("POST", things, "application/json", long).code)
	require.Equal(t, http.StatusCreated, e.do("POST", things, "application/json", `{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"deep"},"spec":{"deep":`+deepJSON(9000, "k")+`}}`).code)
	require.Equal(t, http.StatusCreated, e.do("POST", leases, "application/json", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"}}`).code)

	// A JSON Patch whose copies double the object at each step: 19 ops, 2 KB.
	bomb := []map[string]any{{"op": "add", "path": "/spec/config", "value": map[string]any{"a": strings.Repeat("x", 1024)}}}
	for i := range 18 {
		bomb = append(bomb, map[string]any{"op": "copy", "from": "/spec/config", "path": fmt.Sprintf("/spec/config/c%d", i)})
	}
	many := make([]map[string]any, 65536)
	for i := range many {
		many[i] = map[string]any{"op": "test", "path": "/spec/replicas", "value": 1}
	}
	inserts := make([]map[string]any, 2000)
	for i := range inserts {
		inserts[i] = map[string]any{"op": "add", "path": "/spec/items/0", "value": "y.io/f"}
	}
	deepApply := fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"deep"},"spec":{"replicas":1,"image":"nginx:1","deep":%s}}`,
		deepJSON(9000, strings.Repeat("k", 100)))
	tests := []struct {
		name, method, path, contentType, body string
		code                                  int
		reason                                string
	}{
		{"JSON Patch of doubling copies", "PATCH", appsPath + "/web", "application/json-patch+json", mustMarshal(t, bomb), http.StatusUnprocessableEntity, "Invalid"},
		{"JSON Patch of 65,536 operations", "PATCH", appsPath + "/web", "application/json-patch+json", mustMarshal(t, many), http.StatusRequestEntityTooLarge, "RequestEntityTooLarge"},
		{"JSON Patch of 2,000 inserts into a 10,000-item list", "PATCH", things + "/long", "application/json-patch+json", mustMarshal(t, inserts), http.StatusRequestEntityTooLarge, "RequestEntityTooLarge"},
		{"server-side apply of a 9,000-deep 1 MB object", "PATCH", appsPath + "/deep?fieldManager=m", "application/apply-patch+yaml", deepApply, http.StatusUnprocessableEntity, "Invalid"},
		{"merge patch 9,000 deep", "PATCH", appsPath + "/web", "application/merge-patch+json", `{"spec":{"deep":` + deepJSON(9000, "k") + `}}`, http.StatusUnprocessableEntity, "Invalid"},
		{"JSON Patch adding a value 9,000 deep", "PATCH", appsPath + "/web", "application/json-patch+json", `[{"op":"add","path":"/spec/deep","value":` + deepJSON(9000, "k") + `}]`, http.StatusUnprocessableEntity, "Invalid"},
		{"strategic merge patch 9,000 deep on a Lease", "PATCH", leases + "/l", "application/strategic-merge-patch+json", `{"spec":{"deep":` + deepJSON(9000, "k") + `}}`, http.StatusUnprocessableEntity, "Invalid"},
		{"JSON Patch of an object nested 9,000 deep", "PATCH", things + "/deep", "application/json-patch+json", `[{"op":"add","path":"/metadata/labels","value":{"a":"b"}}]`, http.StatusUnprocessableEntity, "Invalid"},
		{"merge patch 100 deep", "PATCH", appsPath + "/web", "application/merge-patch+json", `{"spec":{"deep":` + deepJSON(97, "k") + `}}`, http.StatusOK, ""},
		{"label selector of 469 KB", "GET", appsPath + "?labelSelector=" + url.QueryEscape(strings.Repeat("a,", 240000)+"a"), "", "", http.StatusBadRequest, "BadRequest"},
		{"field selector of 8 KB on a watch", "GET", appsPath + "?watch=true&fieldSelector=" + url.QueryEscape("metadata.name="+strings.Repeat("a", 8192)), "", "", http.StatusBadRequest, "BadRequest"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, took := e.timed(tt.method, tt.path, tt.contentType, tt.body)
			t.Logf("%s: %d in %v (race detector on)", tt.name, r.code, took)
			if tt.reason == "" {
				require.Equal(t, tt.code, r.code, "body: %.300s", r.body)
				return
			}
			status(t, r, tt.code, tt.reason)
		})
	}
	status(t, e.do("GET", appsPath+"/deep", "", ""), http.StatusNotFound, "NotFound")
	got := e.do("GET", things+"/long", "", "").json(t)
	assert.Len(t, field(got, "spec", "items"), 10000, "the refused patch changed nothing")
	// Within the bounds, patches still work: 20 inserts into the long list.
	r, took := e.timed("PATCH", things+"/long", "application/json-patch+json", mustMarshal(t, inserts[:20]))
	t.Logf("20 inserts into the long list: %d in %v", r.code, took)
	require.Equal(t, http.StatusOK, r.code, "body: %.300s", r.body)
	assert.Len(t, field(r.json(t), "spec", "items"), 10020)
}

// thingCRD serves example.com/v1 Thing, whose objects keep whatever they are sent.
const thingCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Thing, plural: things}
  versions:
  - {name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}
`

// TestSlowAdmissionIsNotCommitted: a write whose admission runs past the request's deadline is
// answered 504 at the deadline and not stored.
func TestSlowAdmissionIsNotCommitted(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) {
		c.RequestTimeout = 300 * time.Millisecond
		c.Admission = &webhooks.Chain{Validating: []webhooks.Named{{Name: "slow",
			Matches: func(req *webhooks.Request) bool { return req.Resource.Resource == "applications" },
			Handler: webhooks.HandlerFunc(func(ctx context.Context, _ *webhooks.Request) webhooks.Response {
				<-ctx.Done()
				return webhooks.Allowed()
			})}}}
	})
	r, took := e.timed("POST", appsPath, "application/json", app("late", 1, "nginx:1"))
	status(t, r, http.StatusGatewayTimeout, "Timeout")
	assert.Less(t, took, 2*time.Second)
	status(t, e.do("GET", appsPath+"/late", "", ""), http.StatusNotFound, "NotFound")
}

// rawRequest opens a connection and sends head (the request line and headers) and body,
// leaving the connection open.
func rawRequest(t *testing.T, e *env, head, body string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(e.http.URL, "http://"))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	_, err = io.WriteString(conn, head+"\r\n"+body)
	require.NoError(t, err)
	return conn
}

// TestUnfinishedBodiesAreCutOff: a body that never finishes holds nothing past the deadline,
// whether the handler reads it (a create) or ignores it (GET /healthz), and whatever the query
// says (a watch=true on a POST is no watch).
func TestUnfinishedBodiesAreCutOff(t *testing.T) {
	t.Parallel()
	const deadline = 500 * time.Millisecond
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.RequestTimeout = deadline })
	host := "Host: 127.0.0.1\r\n"
	tests := []struct {
		name, head string
		code       int
	}{
		{"GET /healthz with an unsent body", "GET /healthz HTTP/1.1\r\n" + host + "Content-Length: 100\r\n", http.StatusOK},
		{"POST with watch=true and an unsent body", "POST " + appsPath + "?watch=true HTTP/1.1\r\n" + host + "Content-Type: application/json\r\nContent-Length: 100\r\n", http.StatusGatewayTimeout},
		{"a list watch with an unsent body", "GET " + appsPath + "?watch=true HTTP/1.1\r\n" + host + "Content-Length: 100\r\n", http.StatusGatewayTimeout},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			conn := rawRequest(t, e, tt.head, `{"apiVersion":`)
			require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			require.NoError(t, err, "an answer")
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			assert.Equal(t, tt.code, resp.StatusCode)
			// The server then lets the connection go: a read sees it closed.
			_, err = conn.Read(make([]byte, 1))
			assert.ErrorIs(t, err, io.EOF, "the server closed the connection")
			took := time.Since(start)
			t.Logf("answered and closed after %v", took)
			assert.Less(t, took, deadline+2*time.Second)
		})
	}
}

// TestWatchOnPOSTCountsAgainstMaxInflight: a POST with watch=true takes an in-flight slot like
// any other write.
func TestWatchOnPOSTCountsAgainstMaxInflight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.MaxInflight = 1 })
	conn := rawRequest(t, e, "POST "+appsPath+"?watch=true HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n", `{"apiVersion":`)
	var r response
	require.Eventually(t, func() bool {
		r = e.do("GET", "/healthz", "", "")
		return r.code == http.StatusTooManyRequests
	}, 5*time.Second, 10*time.Millisecond, "the POST holds the only slot")
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	conn.Close()
	require.Eventually(t, func() bool { return e.do("GET", "/healthz", "", "").code == http.StatusOK }, 5*time.Second, 10*time.Millisecond)
}

// TestMaxWatches: beyond MaxWatches open watches (SSE and Kubernetes alike) a watch gets 429
// with Retry-After; when one ends, another may start.
func TestMaxWatches(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.MaxWatches = 3 })
	first := e.watch("", nil)
	require.Equal(t, http.StatusOK, first.resp.StatusCode)
	require.Equal(t, http.StatusOK, e.watch("?kind=Event", nil).resp.StatusCode)
	e.kubeWatch(appsPath + "?watch=true")
	over := e.watch("", nil)
	require.Equal(t, http.StatusTooManyRequests, over.resp.StatusCode)
	assert.Equal(t, "1", over.resp.Header.Get("Retry-After"))
	r := e.do("GET", appsPath+"?watch=true", "", "")
	m := status(t, r, http.StatusTooManyRequests, "TooManyRequests")
	assert.Contains(t, m["message"], "too many watches")
	assert.Equal(t, http.StatusOK, e.do("GET", appsPath, "", "").code, "lists are not watches")

	first.cancel()
	require.Eventually(t, func() bool {
		c := e.watch("", nil)
		defer c.cancel()
		return c.resp.StatusCode == http.StatusOK
	}, 5*time.Second, 10*time.Millisecond, "a slot frees when a watch ends")
}

// TestSelectorSizeLimit: selectors up to the limit work on lists and both watch protocols;
// beyond it they are a 400.
func TestSelectorSizeLimit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	fits := "tier in (" + strings.Repeat("a,", 2036) + "web)"
	require.Len(t, fits, 4085)
	over := fits[:len(fits)-1] + ",b)"
	over = strings.Replace(over, "tier in (", "tier in (bbbbbbbbbb,", 1)
	require.Greater(t, len(over), 4096)
	assert.Equal(t, http.StatusOK, e.do("GET", appsPath+"?labelSelector="+url.QueryEscape(fits), "", "").code)
	for _, path := range []string{appsPath + "?labelSelector=", appsPath + "?watch=true&labelSelector=", "/watch?labelSelector="} {
		m := status(t, e.do("GET", path+url.QueryEscape(over), "", ""), http.StatusBadRequest, "BadRequest")
		assert.Contains(t, m["message"], "the limit is 4096")
	}
}

// TestDashboardSecurityHeaders: the dashboard cannot be framed, sniffed or made to load
// anything but its own files.
func TestDashboardSecurityHeaders(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"/ui/", "/ui/app.js", "/ui/style.css"} {
		r := e.do("GET", path, "", "")
		require.Equal(t, http.StatusOK, r.code, path)
		csp := r.header.Get("Content-Security-Policy")
		assert.Contains(t, csp, "frame-ancestors 'none'", path)
		assert.Contains(t, csp, "default-src 'self'", path)
		assert.NotContains(t, csp, "unsafe-inline", path)
		assert.Equal(t, "DENY", r.header.Get("X-Frame-Options"), path)
		assert.Equal(t, "nosniff", r.header.Get("X-Content-Type-Options"), path)
	}
}

// TestRejectedHugeNamesStoreSmallEvents: creates with 1 MB names are refused (422), and the
// Warning Events they leave are small and valid: an Event's name is a DNS subdomain, its
// message at most 1 KB. (Six here, under the race detector: apimachinery's own validation of a
// 1 MB name takes a while; TestEventsFromHostileInput in the main package sends 60 to the
// built binary.)
func TestRejectedHugeNamesStoreSmallEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 6 {
		name := fmt.Sprintf("n%d-", i) + strings.Repeat("x", 1<<20)
		status(t, e.do("POST", appsPath, "application/json", app(name, 1, "nginx:1")), http.StatusUnprocessableEntity, "Invalid")
	}
	list := e.do("GET", "/api/v1/events", "", "")
	require.Equal(t, http.StatusOK, list.code)
	t.Logf("Events stored after 6 rejections of 1 MB names: %d bytes", len(list.body))
	assert.Less(t, len(list.body), 100<<10, "less than 100 KB of Events")
	items := list.json(t)["items"].([]any)
	require.NotEmpty(t, items)
	for _, it := range items {
		ev := it.(map[string]any)
		assert.Empty(t, apivalidation.NameIsDNSSubdomain(field(ev, "metadata", "name").(string), false))
		assert.LessOrEqual(t, len(ev["message"].(string)), events.MaxMessageBytes)
		assert.LessOrEqual(t, len(field(ev, "involvedObject", "name").(string)), events.MaxNameBytes)
	}
}

// TestClientEventsCountAgainstTheLimit: Events clients create count against EVENT_LIMIT like
// the server's own; the oldest go first and /events/stats agrees with the store.
func TestClientEventsCountAgainstTheLimit(t *testing.T) {
	t.Parallel()
	const limit = 50
	e := newEnvWithEventLimit(t, limit)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 75 {
				ts := time.Date(2026, 11, 24, 10, 0, w*75+i, 0, time.UTC).Format(time.RFC3339)
				body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"c-%d-%d"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"Client","message":"m","lastTimestamp":%q}`, w, i, ts)
				assert.Equal(t, http.StatusCreated, e.do("POST", "/api/v1/namespaces/default/events", "application/json", body).code)
			}
		})
	}
	wg.Wait()
	// The server's own Events count too: one more rejected create records a Warning.
	status(t, e.do("POST", appsPath, "application/json", app("bad", 1000, "nginx:1")), http.StatusUnprocessableEntity, "Invalid")
	items := e.do("GET", "/api/v1/events", "", "").json(t)["items"].([]any)
	assert.Len(t, items, limit)
	var stats struct{ Total int }
	require.NoError(t, json.Unmarshal(e.do("GET", "/events/stats", "", "").body, &stats))
	assert.Equal(t, len(items), stats.Total, "/events/stats counts what is stored")
	names := map[string]bool{}
	for _, it := range items {
		names[field(it.(map[string]any), "metadata", "name").(string)] = true
	}
	assert.True(t, names["c-3-74"], "the newest client Event is kept")
	assert.False(t, names["c-0-0"], "the oldest went")
}
