package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func eventReasons(t *testing.T, e *env, query string) []string {
	t.Helper()
	r := e.do("GET", "/events"+query, "", "")
	require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
	var body struct {
		Events []map[string]any `json:"events"`
	}
	require.NoError(t, json.Unmarshal(r.body, &body))
	var out []string
	for _, ev := range body.Events {
		out = append(out, ev["reason"].(string))
	}
	return out
}

func TestWritePathRecordsEvents(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1")).code)
	require.Equal(t, http.StatusOK, e.do("PATCH", appsPath+"/web", "application/merge-patch+json", `{"spec":{"replicas":2}}`).code)
	require.Equal(t, http.StatusOK, e.do("PATCH", appsPath+"/web", "application/merge-patch+json", `{"spec":{"replicas":2}}`).code, "a no-op")
	require.Equal(t, http.StatusOK, e.do("PATCH", appsPath+"/web/status", "application/merge-patch+json", `{"status":{"phase":"Running"}}`).code)
	require.Equal(t, http.StatusOK, e.do("POST", appsPath+"?dryRun=All", "application/json", app("dry", 1, "nginx:1")).code/201*200)
	status(t, e.do("POST", appsPath, "application/json", app("web2", 150, "nginx:1")), 422, "Invalid")
	status(t, e.do("POST", appsPath, "application/json", app("web3", 1, "alpine:3")), 403, "Forbidden")
	require.Equal(t, http.StatusOK, e.do("DELETE", appsPath+"/web", "", "").code)
	assert.Equal(t, []string{"Created", "Updated", "ValidationFailed", "AdmissionDenied", "Deleted"}, eventReasons(t, e, ""))
	assert.Equal(t, []string{"ValidationFailed", "AdmissionDenied"}, eventReasons(t, e, "?type=Warning"))
	assert.Equal(t, []string{"Created", "Updated", "Deleted"}, eventReasons(t, e, "?name=web"))
	assert.Equal(t, []string{"Deleted"}, eventReasons(t, e, "?name=web&limit=1"))
	assert.Empty(t, eventReasons(t, e, "?since=2999-01-01T00:00:00Z"))
	status(t, e.do("GET", "/events?since=yesterday", "", ""), 400, "BadRequest")

	st := e.do("GET", "/events/stats", "", "").json(t)
	assert.EqualValues(t, 5, st["total"])
	assert.EqualValues(t, 5, st["lastHour"])
	assert.EqualValues(t, 3, field(st, "byType", "Normal"))
	assert.EqualValues(t, 2, field(st, "bySeverity", "Warning"))

	// The same Events as Kubernetes objects, with kubectl's field selectors.
	l := e.do("GET", "/api/v1/namespaces/default/events?fieldSelector=involvedObject.name%3Dweb,reason%3DCreated", "", "")
	require.Equal(t, http.StatusOK, l.code, "body: %s", l.body)
	list := l.json(t)
	assert.Equal(t, "EventList", list["kind"])
	assert.Len(t, list["items"], 1)
	assert.Len(t, e.do("GET", "/api/v1/events", "", "").json(t)["items"], 5)
}

// fakeController records what the server asks of the controller.
type fakeController struct {
	leading bool
	queued  []cache.Key
}

func (f *fakeController) Enqueue(key cache.Key) bool {
	if !f.leading {
		return false
	}
	f.queued = append(f.queued, key)
	return true
}

func (f *fakeController) History(key cache.Key) (any, bool) {
	return []map[string]any{{"generation": 1, "success": true}}, key.Resource == "applications"
}

func TestReconcileAndHistoryRoutes(t *testing.T) {
	t.Parallel()
	fc := &fakeController{leading: true}
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.Controller = fc })
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1")).code)
	r := e.do("POST", appsPath+"/web/reconcile", "", "")
	require.Equal(t, http.StatusAccepted, r.code, "body: %s", r.body)
	assert.Equal(t, []cache.Key{{Group: "cloudnative.elide.dev", Resource: "applications", Namespace: "default", Name: "web"}}, fc.queued)
	status(t, e.do("POST", appsPath+"/missing/reconcile", "", ""), 404, "NotFound")
	status(t, e.do("GET", appsPath+"/web/reconcile", "", ""), 405, "MethodNotAllowed")

	h := e.do("GET", appsPath+"/web/history", "", "")
	require.Equal(t, http.StatusOK, h.code)
	assert.Len(t, h.json(t)["items"], 1)
	status(t, e.do("GET", appsPath+"/missing/history", "", ""), 404, "NotFound")

	fc.leading = false
	m := status(t, e.do("POST", appsPath+"/web/reconcile", "", ""), 503, "ServiceUnavailable")
	assert.Contains(t, m["message"], "does not lead")

	off := newEnv(t)
	require.Equal(t, http.StatusCreated, off.do("POST", appsPath, "application/json", app("web", 1, "nginx:1")).code)
	status(t, off.do("POST", appsPath+"/web/reconcile", "", ""), 503, "ServiceUnavailable")
	assert.Empty(t, off.do("GET", appsPath+"/web/history", "", "").json(t)["items"])
}

// kubeStream reads a Kubernetes watch stream line by line.
type kubeStream struct {
	t     testing.TB
	lines chan string
	resp  *http.Response
}

func (e *env) kubeWatch(path string) *kubeStream {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, "GET", e.http.URL+path, nil)
	require.NoError(e.t, err)
	resp, err := e.http.Client().Do(req)
	require.NoError(e.t, err)
	e.t.Cleanup(func() { cancel(); resp.Body.Close() })
	require.Equal(e.t, http.StatusOK, resp.StatusCode)
	ks := &kubeStream{t: e.t, lines: make(chan string, 100), resp: resp}
	go func() {
		defer close(ks.lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			ks.lines <- sc.Text()
		}
	}()
	return ks
}

func (ks *kubeStream) next() (string, map[string]any) {
	ks.t.Helper()
	select {
	case line, ok := <-ks.lines:
		require.True(ks.t, ok, "the stream closed")
		var ev struct {
			Type   string         `json:"type"`
			Object map[string]any `json:"object"`
		}
		require.NoError(ks.t, json.Unmarshal([]byte(line), &ev), "line: %s", line)
		return ev.Type, ev.Object
	case <-time.After(5 * time.Second):
		ks.t.Fatal("no watch event within 5s")
		return "", nil
	}
}

func (ks *kubeStream) closed() bool {
	select {
	case _, ok := <-ks.lines:
		return !ok
	case <-time.After(5 * time.Second):
		return false
	}
}

func TestKubernetesWatch(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("a", 1, "nginx:1")).code)
	listRV := field(e.do("GET", appsPath, "", "").json(t), "metadata", "resourceVersion").(string)

	// No resourceVersion: synthetic ADDED first, then changes.
	w := e.kubeWatch(appsPath + "?watch=true")
	typ, obj := w.next()
	assert.Equal(t, "ADDED", typ)
	assert.Equal(t, "a", field(obj, "metadata", "name"))
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("b", 1, "nginx:1")).code)
	typ, obj = w.next()
	assert.Equal(t, "ADDED", typ)
	assert.Equal(t, "b", field(obj, "metadata", "name"))

	// From the list's version: only what came after it.
	r := e.kubeWatch(appsPath + "?watch=true&resourceVersion=" + listRV)
	typ, obj = r.next()
	assert.Equal(t, "ADDED", typ)
	assert.Equal(t, "b", field(obj, "metadata", "name"))

	// A field selector, as kubectl get NAME -w sends it.
	f := e.kubeWatch(appsPath + "?watch=true&fieldSelector=metadata.name%3Db&resourceVersion=0")
	typ, obj = f.next()
	assert.Equal(t, "ADDED", typ)
	assert.Equal(t, "b", field(obj, "metadata", "name"))

	// An expired version: 200, one ERROR event with a 410 Status, then the end.
	old := strconv.FormatUint(e.store.StartResourceVersion()-1, 10)
	x := e.kubeWatch(appsPath + "?watch=true&resourceVersion=" + old)
	typ, obj = x.next()
	assert.Equal(t, "ERROR", typ)
	assert.EqualValues(t, 410, obj["code"])
	assert.Equal(t, "Expired", obj["reason"])
	assert.True(t, x.closed())

	// The watch-list: initial events, then the initial-events-end bookmark.
	wl := e.kubeWatch(appsPath + "?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true")
	for range 2 {
		typ, _ = wl.next()
		assert.Equal(t, "ADDED", typ)
	}
	typ, obj = wl.next()
	assert.Equal(t, "BOOKMARK", typ)
	assert.Equal(t, "Application", obj["kind"])
	assert.Equal(t, "cloudnative.elide.dev/v1", obj["apiVersion"])
	assert.Equal(t, "true", field(obj, "metadata", "annotations").(map[string]any)["k8s.io/initial-events-end"])

	// timeoutSeconds ends the stream, with a bookmark just before when allowed.
	to := e.kubeWatch(appsPath + "?watch=true&resourceVersion=" + listRV + "&timeoutSeconds=1&allowWatchBookmarks=true")
	typ, _ = to.next()
	assert.Equal(t, "ADDED", typ)
	typ, obj = to.next()
	assert.Equal(t, "BOOKMARK", typ)
	assert.NotEmpty(t, field(obj, "metadata", "resourceVersion"))
	assert.True(t, to.closed())

	// Events are watchable the same way.
	ev := e.kubeWatch("/api/v1/namespaces/default/events?watch=true")
	typ, obj = ev.next()
	assert.Equal(t, "ADDED", typ)
	assert.Equal(t, "Event", obj["kind"])
	assert.True(t, strings.HasPrefix(field(obj, "metadata", "name").(string), "a."))
}

func TestKubernetesWatchBookmarks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.BookmarkInterval = 50 * time.Millisecond })
	w := e.kubeWatch(appsPath + "?watch=true&allowWatchBookmarks=true&resourceVersion=" + strconv.FormatUint(e.store.ResourceVersion(), 10))
	typ, obj := w.next()
	assert.Equal(t, "BOOKMARK", typ)
	assert.Equal(t, strconv.FormatUint(e.store.ResourceVersion(), 10), field(obj, "metadata", "resourceVersion"))
}
