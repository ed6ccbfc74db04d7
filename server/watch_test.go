package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
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

// frame is one parsed SSE frame.
type frame struct {
	id      string
	hasID   bool
	data    string
	comment string
	retry   string
}

// sseClient reads frames from a /watch response.
type sseClient struct {
	t      testing.TB
	resp   *http.Response
	frames chan frame
	cancel context.CancelFunc
}

func (e *env) watch(query string, header map[string]string) *sseClient {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.http.URL+"/watch"+query, nil)
	require.NoError(e.t, err)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := e.http.Client().Do(req)
	require.NoError(e.t, err)
	c := &sseClient{t: e.t, resp: resp, frames: make(chan frame, 1000), cancel: cancel}
	e.t.Cleanup(func() { cancel(); resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		return c
	}
	require.Equal(e.t, "text/event-stream", resp.Header.Get("Content-Type"))
	go func() {
		defer close(c.frames)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var f frame
		empty := true
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if !empty {
					c.frames <- f
				}
				f, empty = frame{}, true
				continue
			case strings.HasPrefix(line, ":"):
				f.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "id:"):
				f.id, f.hasID = strings.TrimSpace(line[3:]), true
			case strings.HasPrefix(line, "data:"):
				f.data = strings.TrimSpace(line[5:])
			case strings.HasPrefix(line, "retry:"):
				f.retry = strings.TrimSpace(line[6:])
			}
			empty = false
		}
	}()
	return c
}

// next returns the next frame that is not a comment or a retry line.
func (c *sseClient) next() (frame, bool) {
	c.t.Helper()
	for {
		select {
		case f, ok := <-c.frames:
			if !ok {
				return frame{}, false
			}
			if f.data == "" {
				continue
			}
			return f, true
		case <-time.After(5 * time.Second):
			c.t.Fatal("no SSE frame within 5s")
			return frame{}, false
		}
	}
}

type watchEvent struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

func (c *sseClient) event() (watchEvent, string) {
	c.t.Helper()
	f, ok := c.next()
	require.True(c.t, ok, "stream closed")
	var ev watchEvent
	require.NoError(c.t, json.Unmarshal([]byte(f.data), &ev), "data: %s", f.data)
	return ev, f.id
}

func TestSSEFramesAndResume(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watch("", nil)
	first, ok := <-w.frames
	require.True(t, ok)
	assert.Equal(t, "2000", first.retry, "the stream starts with retry: 2000")

	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("a", 1, "nginx:1")).code)
	ev, id := w.event()
	assert.Equal(t, "ADDED", ev.Type)
	assert.Equal(t, "a", field(ev.Object, "metadata", "name"))
	_ = id
	assert.Equal(t, field(ev.Object, "metadata", "resourceVersion"), id, "the frame id is the resourceVersion")

	// Three more changes while a second client is away.
	require.Equal(t, http.StatusOK, e.do("PATCH", appsPath+"/a", "application/merge-patch+json", `{"spec":{"replicas":2}}`).code)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("b", 1, "nginx:1")).code)
	require.Equal(t, http.StatusOK, e.do("DELETE", appsPath+"/a", "", "").code)
	var want []string
	for range 3 {
		ev, id := w.event()
		want = append(want, ev.Type+" "+id)
	}
	assert.Equal(t, "MODIFIED", strings.Fields(want[0])[0])
	assert.Equal(t, "DELETED", strings.Fields(want[2])[0])

	// Reconnecting with Last-Event-ID replays exactly what came after it.
	again := e.watch("", map[string]string{"Last-Event-ID": strings.Fields(want[0])[1]})
	var got []string
	for range 2 {
		ev, id := again.event()
		got = append(got, ev.Type+" "+id)
	}
	assert.Equal(t, want[1:], got, "nothing lost, nothing repeated")
	// And with ?resourceVersion= the same.
	byQuery := e.watch("?resourceVersion="+strings.Fields(want[0])[1], nil)
	got = got[:0]
	for range 2 {
		ev, id := byQuery.event()
		got = append(got, ev.Type+" "+id)
	}
	assert.Equal(t, want[1:], got)
}

func TestSSEExpiredVersionGetsErrorFrame(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// A version from an earlier run (below this store's start) cannot be served.
	old := strconv.FormatUint(e.store.StartResourceVersion()-1000, 10)
	for _, tc := range []struct {
		name   string
		query  string
		header map[string]string
	}{
		{"Last-Event-ID from an earlier run", "", map[string]string{"Last-Event-ID": old}},
		{"resourceVersion from an earlier run", "?resourceVersion=" + old, nil},
		{"version never issued", "?resourceVersion=" + strconv.FormatUint(e.store.ResourceVersion()+1000, 10), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := e.watch(tc.query, tc.header)
			require.Equal(t, http.StatusOK, w.resp.StatusCode)
			f, ok := w.next()
			require.True(t, ok)
			assert.True(t, f.hasID, "the ERROR frame carries an id: line")
			assert.Empty(t, f.id, "an empty id, so a browser reconnects from now")
			var ev watchEvent
			require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
			assert.Equal(t, "ERROR", ev.Type)
			assert.EqualValues(t, 410, ev.Object["code"])
			assert.Equal(t, "Expired", ev.Object["reason"])
			_, open := w.next2()
			assert.False(t, open, "the stream is closed after the ERROR frame")
		})
	}
}

// next2 reports whether another frame arrives before the stream closes.
func (c *sseClient) next2() (frame, bool) {
	select {
	case f, ok := <-c.frames:
		return f, ok
	case <-time.After(5 * time.Second):
		c.t.Fatal("stream neither closed nor sent within 5s")
		return frame{}, false
	}
}

func TestSSEBadLastEventID(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	w := e.watch("", map[string]string{"Last-Event-ID": "not-a-number"})
	assert.Equal(t, http.StatusBadRequest, w.resp.StatusCode)
	assert.Equal(t, http.StatusBadRequest, e.watch("?kind=Widget", nil).resp.StatusCode)
}

func TestSSEFiltersAndInitial(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.namespaces("team")
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("a", 1, "nginx:1")).code)
	require.Equal(t, http.StatusCreated, e.do("POST", "/apis/cloudnative.elide.dev/v1/namespaces/team/applications", "application/json", app("b", 1, "nginx:1")).code)

	w := e.watch("?initial=true&namespace=team", nil)
	ev, id := w.event()
	assert.Equal(t, "ADDED", ev.Type)
	assert.Equal(t, "b", field(ev.Object, "metadata", "name"))
	assert.Equal(t, strconv.FormatUint(e.store.ResourceVersion(), 10), id, "initial events carry the snapshot's version")

	ns := e.watch("?kind=Namespace&initial=true", nil)
	seen := map[string]bool{}
	for range 5 { // the system namespaces and team
		ev, _ := ns.event()
		assert.Equal(t, "Namespace", ev.Object["kind"])
		seen[field(ev.Object, "metadata", "name").(string)] = true
	}
	assert.True(t, seen["default"] && seen["kube-system"] && seen["team"])

	// A label filter: the label change into the selector arrives as ADDED.
	lw := e.watch("?labelSelector=tier%3Dweb", nil)
	require.Equal(t, http.StatusOK, e.do("PATCH", appsPath+"/a", "application/merge-patch+json", `{"metadata":{"labels":{"tier":"web"}}}`).code)
	ev, _ = lw.event()
	assert.Equal(t, "ADDED", ev.Type)
	require.Equal(t, http.StatusOK, e.do("PATCH", appsPath+"/a", "application/merge-patch+json", `{"metadata":{"labels":{"tier":"db"}}}`).code)
	ev, _ = lw.event()
	assert.Equal(t, "DELETED", ev.Type)
}

func TestSSEHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, _ *cache.Config) { c.Heartbeat = 20 * time.Millisecond })
	w := e.watch("", nil)
	deadline := time.After(5 * time.Second)
	for {
		select {
		case f := <-w.frames:
			if f.comment == "ping" {
				return
			}
		case <-deadline:
			t.Fatal("no : ping within 5s")
		}
	}
}

// TestSSESlowClientDoesNotSlowOthers connects a client with a tiny receive buffer that never
// reads, and a normal client. Writes must go on at full speed; the normal client must see all of
// them; the stalled one must be disconnected.
func TestSSESlowClientDoesNotSlowOthers(t *testing.T) {
	t.Parallel()
	e := newEnv(t, func(c *server.Config, s *cache.Config) {
		c.WriteTimeout = 200 * time.Millisecond
		s.WatchBuffer = 64
	})
	addr := strings.TrimPrefix(e.http.URL, "http://")
	d := net.Dialer{Control: nil}
	conn, err := d.Dial("tcp", addr)
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(1024))
	_, err = fmt.Fprintf(conn, "GET /watch HTTP/1.1\r\nHost: %s\r\n\r\n", addr)
	require.NoError(t, err)

	fast := e.watch("", nil)
	const n = 400
	big := strings.Repeat("x", 16000)
	start := time.Now()
	for i := range n {
		body := fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"app-%d","annotations":{"pad":"%s"}},"spec":{"replicas":1,"image":"nginx:1","resources":{"limits":{"cpu":"1"}}}}`, i, big)
		require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", body).code)
	}
	elapsed := time.Since(start)
	for i := range n {
		ev, _ := fast.event()
		require.Equal(t, fmt.Sprintf("app-%d", i), field(ev.Object, "metadata", "name"))
	}
	t.Logf("%d writes with a stalled watcher took %v", n, elapsed)

	// The server gives up on the stalled client: only the fast one is still counted. (Reading
	// the stalled socket to its end is no test: with a tiny receive window the kernel's
	// silly-window avoidance makes the drain itself crawl.)
	require.Eventually(t, func() bool {
		return strings.Contains(string(e.do("GET", "/metrics", "", "").body), `watch_clients{protocol="sse"} 1`+"\n")
	}, 10*time.Second, 20*time.Millisecond, "the stalled client was never disconnected")
	// The fast client is still served.
	require.Equal(t, http.StatusOK, e.do("DELETE", appsPath+"/app-0", "", "").code)
	ev, _ := fast.event()
	assert.Equal(t, "DELETED", ev.Type)
}

// fedWatches is a store whose watches a cache.WatchCache serves, as package etcd's are: the
// tests below refill it as a replica refills its cache from etcd.
type fedWatches struct {
	*cache.Store
	fed *cache.WatchCache
}

func (f fedWatches) Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error) {
	return f.fed.Watch(ctx, opts)
}

func (f fedWatches) Close() { f.fed.Close(); f.Store.Close() }

// TestRefilledCacheEndsWatchesWith410: when a watch cache is refilled from its source (etcd
// compacted past its watch; cache.WatchCache.Replace), SSE and Kubernetes watchers get a 410
// ERROR and the stream ends, so they list again instead of missing what changed meanwhile.
func TestRefilledCacheEndsWatchesWith410(t *testing.T) {
	t.Parallel()
	store := fedWatches{Store: cache.New(cache.Config{}), fed: cache.NewWatchCache(cache.Config{})}
	e := newEnvOn(t, store, 0)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1")).code)
	store.fed.Advance(store.ResourceVersion()) // the source's writes reached the cache
	sse := e.watch("?kind=Application", nil)
	kube := e.kubeWatch(appsPath + "?watch=true&resourceVersion=" + strconv.FormatUint(e.store.ResourceVersion(), 10))
	require.NoError(t, store.fed.Replace(nil, store.ResourceVersion()))

	f, ok := sse.next()
	require.True(t, ok)
	var ev watchEvent
	require.NoError(t, json.Unmarshal([]byte(f.data), &ev))
	assert.Equal(t, "ERROR", ev.Type)
	assert.EqualValues(t, 410, ev.Object["code"])
	assert.True(t, f.hasID)
	assert.Empty(t, f.id, "an empty id: a browser reconnects from now")
	_, open := sse.next2()
	assert.False(t, open)

	typ, obj := kube.next()
	assert.Equal(t, "ERROR", typ)
	assert.EqualValues(t, 410, obj["code"])
	assert.Equal(t, "Expired", obj["reason"])
	assert.True(t, kube.closed())
}
