package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/test/internal/request"
)

// Acceptance tests of STORE=etcd (SPEC §12) with real processes: an etcd started by the test
// (Debian's etcd-server) and replicas of the binary.

// etcdReplica starts a replica with STORE=etcd over e (keys under prefix), with the short
// election timings of the HA tests, and waits until it serves.
func etcdReplica(t *testing.T, name string, e *etcdtest.Server, prefix string, env ...string) *replica {
	t.Helper()
	return etcdReplicaOf(t, name, e.Endpoint, prefix, env...)
}

// etcdReplicaOf is etcdReplica over the etcd at endpoints (comma-separated). It returns once
// the replica is wired (GET /version is 200: while it waits for etcd only its probes answer).
func etcdReplicaOf(t *testing.T, name, endpoints, prefix string, env ...string) *replica {
	t.Helper()
	return startEtcdReplica(t, name, endpoints, prefix, "/version", env...)
}

// startEtcdReplica starts a replica and waits until path answers 200.
func startEtcdReplica(t *testing.T, name, endpoints, prefix, path string, env ...string) *replica {
	t.Helper()
	p := startBinary(t, binary, append([]string{"STORE=etcd", "ETCD_ENDPOINTS=" + endpoints, "ETCD_PREFIX=" + prefix,
		"POD_NAME=" + name, "LEASE_DURATION=" + haLease.String(), "RENEW_DEADLINE=" + haRenew.String(), "RETRY_PERIOD=" + haRetry.String()}, env...)...)
	require.Eventually(t, func() bool {
		resp, err := quick.Get("http://" + p.addr + path)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 15*time.Second, 10*time.Millisecond, "%s answers %s; logs:\n%s", name, path, p.logs())
	return &replica{name: name, p: p}
}

// failoverBound is how long the tests wait for a leader after kill -9 of one: SPEC §8's
// LEASE_DURATION + 4.4 × RETRY_PERIOD plus the sampling slack (what they assert adds the
// machine's measured load, see loadMeter).
var failoverBound = haLease + failoverJitter + slack

func (r *replica) url(path string) string { return "http://" + r.p.addr + path }

const appsPath = "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"

func appBody(name string, replicas int) string {
	return fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":%q},"spec":{"replicas":%d,"image":"nginx:1.27"}}`, name, replicas)
}

// rawGet returns the status and body of a GET.
func rawGet(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// appStatus reads an Application's phase and ready replicas through r (a consistent read).
func appStatus(t *testing.T, r *replica, name string) (phase string, ready float64, rv string) {
	t.Helper()
	code, obj := request.JSON(t, "GET", r.url(appsPath+"/"+name), "")
	if code != http.StatusOK {
		return "", 0, ""
	}
	st, _ := obj["status"].(map[string]any)
	phase, _ = st["phase"].(string)
	ready, _ = st["readyReplicas"].(float64)
	rv, _ = obj["metadata"].(map[string]any)["resourceVersion"].(string)
	return phase, ready, rv
}

// readyEventSource returns who recorded the Ready Event of Application name (its source.host).
func readyEventSource(t *testing.T, r *replica, name string) []string {
	t.Helper()
	code, obj := request.JSON(t, "GET", r.url("/api/v1/namespaces/default/events?fieldSelector=involvedObject.name="+name+",reason=Ready"), "")
	require.Equal(t, http.StatusOK, code)
	var hosts []string
	for _, it := range obj["items"].([]any) {
		src, _ := it.(map[string]any)["source"].(map[string]any)
		h, _ := src["host"].(string)
		hosts = append(hosts, h)
	}
	return hosts
}

// eventually asserts that got() returns want within 5 s (Events are written after the action
// they record, with STORE=etcd).
func eventually[T any](t *testing.T, want T, got func() T, msg string) {
	t.Helper()
	var last T
	if !assert.Eventually(t, func() bool { last = got(); return assert.ObjectsAreEqual(want, last) }, 5*time.Second, 20*time.Millisecond, msg) {
		t.Logf("want %v, last got %v", want, last)
	}
}

// TestEtcdReplicasShareOneTruth is SPEC §12's story with one etcd and three replicas: an
// Application created through a follower reaches Running, reconciled by the leader; every
// replica answers the same object with the same resourceVersion and bytes; a CRD created on one
// replica is served by all; a watch opened on one replica and resumed on another with the last
// id loses and repeats nothing; kill -9 of the leader mid-rollout: another replica leads within
// the §8 bound and finishes the rollout; every replica stopped and one started again: every
// object is there.
func TestEtcdReplicasShareOneTruth(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	step := "ROLLOUT_STEP=400ms"
	rs := []*replica{etcdReplica(t, "etcd-1", e, "/share", step), etcdReplica(t, "etcd-2", e, "/share", step), etcdReplica(t, "etcd-3", e, "/share", step)}
	s := newSampler(rs...)
	samplerDone := false
	defer func() {
		if !samplerDone {
			s.finish(t)
		}
	}()
	leader, _ := waitLeader(t, haLease+time.Duration(4.4*float64(haRetry)), rs...)
	require.Eventually(t, func() bool {
		for _, r := range rs {
			if v, ok := r.view(); !ok || v.Leader != leader.name {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "every replica agrees who leads")
	followers := without(rs, leader)

	// Created through a follower, reconciled by the leader.
	code, _ := request.JSON(t, "POST", followers[0].url(appsPath), appBody("web", 2))
	require.Equal(t, http.StatusCreated, code)
	require.Eventually(t, func() bool {
		phase, ready, _ := appStatus(t, followers[1], "web")
		return phase == "Running" && ready == 2
	}, 10*time.Second, 20*time.Millisecond, "the Application created through a follower reaches Running")
	eventually(t, []string{leader.name}, func() []string { return readyEventSource(t, followers[0], "web") }, "the leader reconciled it")

	// The same object, version and bytes on every replica.
	var bodies []string
	for _, r := range rs {
		code, b := rawGet(t, r.url(appsPath+"/web"))
		require.Equal(t, http.StatusOK, code)
		bodies = append(bodies, string(b))
	}
	assert.Equal(t, bodies[0], bodies[1])
	assert.Equal(t, bodies[0], bodies[2])

	// A CRD created through one replica is served by every replica at once.
	code, _ = request.JSON(t, "POST", rs[0].url("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"), widgetCRD)
	require.Equal(t, http.StatusCreated, code)
	for _, r := range rs {
		require.Eventually(t, func() bool {
			code, _ := rawGet(t, r.url(widgetsPath))
			return code == http.StatusOK
		}, 5*time.Second, 10*time.Millisecond, "%s serves widgets", r.name)
	}

	// A watch on one replica, resumed on another from the last id it delivered.
	first := openSSEFrom(t, rs[1].url("/watch?kind=Widget"), "")
	var written []string
	write := func(i int) {
		var code int
		var obj map[string]any
		if i%3 == 2 {
			code, obj = request.JSON(t, "PUT", rs[2].url(widgetsPath+"/w"+strconv.Itoa(i-1)), widgetBody("w"+strconv.Itoa(i-1), i))
		} else {
			code, obj = request.JSON(t, "POST", rs[2].url(widgetsPath), widgetBody("w"+strconv.Itoa(i), i))
		}
		require.True(t, code == http.StatusCreated || code == http.StatusOK, "write %d: %d %v", i, code, obj)
		written = append(written, obj["metadata"].(map[string]any)["resourceVersion"].(string))
	}
	for i := range 9 {
		write(i)
	}
	seen := first.take(t, 6)
	first.close()
	second := openSSEFrom(t, rs[0].url("/watch?kind=Widget"), seen[len(seen)-1].id)
	for i := 9; i < 15; i++ {
		write(i)
	}
	seen = append(seen, second.take(t, len(written)-len(seen))...)
	second.expectNone(t, 200*time.Millisecond)
	second.close()
	var ids []string
	for _, ev := range seen {
		ids = append(ids, ev.id)
	}
	assert.Equal(t, written, ids, "every write once, in order, across the two replicas")

	// A paged list begun on one replica continues on the others, at the first page's version.
	_, all := rawGet(t, rs[1].url(widgetsPath))
	var paged []string
	cont, listRV := "", ""
	for i := 0; i == 0 || cont != ""; i++ {
		url := rs[i%3].url(widgetsPath + "?limit=4")
		if cont != "" {
			url += "&continue=" + cont
		}
		code, obj := request.JSON(t, "GET", url, "")
		require.Equal(t, http.StatusOK, code, "page %d: %v", i, obj)
		for _, it := range obj["items"].([]any) {
			paged = append(paged, it.(map[string]any)["metadata"].(map[string]any)["name"].(string))
		}
		md := obj["metadata"].(map[string]any)
		if listRV == "" {
			listRV = md["resourceVersion"].(string)
		}
		assert.Equal(t, listRV, md["resourceVersion"], "every page carries the first page's version")
		cont, _ = md["continue"].(string)
	}
	var names []string
	for name := range itemsOf(t, all) {
		names = append(names, name)
	}
	sort.Strings(names)
	assert.Equal(t, names, paged)

	// kill -9 of the leader mid-rollout.
	code, _ = request.JSON(t, "POST", followers[0].url(appsPath), appBody("big", 40))
	require.Equal(t, http.StatusCreated, code)
	require.Eventually(t, func() bool {
		_, ready, _ := appStatus(t, followers[0], "big")
		return ready > 0
	}, 10*time.Second, 10*time.Millisecond)
	_, readyAtKill, _ := appStatus(t, leader, "big")
	require.Less(t, readyAtKill, 40.0, "still rolling out when killed")
	load := startLoadMeter(t, t.TempDir())
	require.NoError(t, leader.p.cmd.Process.Signal(syscall.SIGKILL))
	next, took := waitLeader(t, failoverBound, followers...)
	margin, why := load.margin()
	t.Logf("kill -9 of %s with %v of 40 ready: %s leads in %v (bound %v + %s)", leader.name, readyAtKill, next.name, took, haLease+failoverJitter, why)
	assert.LessOrEqual(t, took, haLease+failoverJitter+margin)
	require.Eventually(t, func() bool {
		phase, ready, _ := appStatus(t, next, "big")
		return phase == "Running" && ready == 40
	}, 15*time.Second, 20*time.Millisecond, "the new leader finishes the rollout")
	eventually(t, []string{next.name}, func() []string { return readyEventSource(t, next, "big") }, "the new leader finished it")
	s.finish(t)
	samplerDone = true

	// Every replica stopped, one started again: every object is there, as it was.
	_, before := rawGet(t, next.url(appsPath))
	_, widgetsBefore := rawGet(t, next.url(widgetsPath))
	for _, r := range followers {
		require.NoError(t, r.p.cmd.Process.Signal(syscall.SIGTERM))
		assert.Equal(t, 0, r.p.wait(t, 5*time.Second), "SIGTERM: exit 0 within 5 s")
	}
	again := etcdReplica(t, "etcd-4", e, "/share", step, "ENABLE_CONTROLLER=false")
	_, after := rawGet(t, again.url(appsPath))
	assert.Equal(t, itemsOf(t, before), itemsOf(t, after), "every Application is there")
	_, widgetsAfter := rawGet(t, again.url(widgetsPath))
	assert.Equal(t, itemsOf(t, widgetsBefore), itemsOf(t, widgetsAfter), "every Widget (and their kind) is there")

	// The CRD deleted through one replica stops being served by the others, and their watches
	// of its kind end.
	other := etcdReplica(t, "etcd-5", e, "/share", step, "ENABLE_CONTROLLER=false")
	watch, err := http.Get(other.url(widgetsPath + "?watch=true"))
	require.NoError(t, err)
	defer watch.Body.Close()
	ended := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, watch.Body); close(ended) }()
	code, _ = request.JSON(t, "DELETE", again.url("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.test.opemu.dev"), "")
	require.Equal(t, http.StatusOK, code)
	require.Eventually(t, func() bool { code, _ := rawGet(t, other.url(widgetsPath)); return code == http.StatusNotFound }, 5*time.Second, 10*time.Millisecond)
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch of the deleted kind on another replica did not end")
	}
}

// itemsOf returns name → resourceVersion of a list's items.
func itemsOf(t *testing.T, list []byte) map[string]string {
	t.Helper()
	var l struct {
		Items []struct {
			Metadata struct{ Name, ResourceVersion string } `json:"metadata"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(list, &l))
	out := map[string]string{}
	for _, it := range l.Items {
		out[it.Metadata.Name] = it.Metadata.ResourceVersion
	}
	require.NotEmpty(t, out)
	return out
}

const widgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
"metadata":{"name":"widgets.test.opemu.dev"},
"spec":{"group":"test.opemu.dev","scope":"Namespaced","names":{"kind":"Widget","plural":"widgets"},
"versions":[{"name":"v1","served":true,"storage":true,
"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

const widgetsPath = "/apis/test.opemu.dev/v1/namespaces/default/widgets"

func widgetBody(name string, n int) string {
	return fmt.Sprintf(`{"apiVersion":"test.opemu.dev/v1","kind":"Widget","metadata":{"name":%q},"spec":{"n":%d}}`, name, n)
}

// idEvent is one SSE frame: its id and event type.
type idEvent struct{ id, typ, name string }

// idStream reads an SSE stream in the background.
type idStream struct {
	resp   *http.Response
	events chan idEvent
}

// openSSE opens url, resuming after lastID when it is set.
func openSSEFrom(t *testing.T, url, lastID string) *idStream {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	require.NoError(t, err)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	s := &idStream{resp: resp, events: make(chan idEvent, 1000)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var ev idEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "id: "):
				ev.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "data: "):
				var d struct {
					Type   string
					Object struct {
						Metadata struct{ Name string }
					}
				}
				_ = json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &d)
				ev.typ, ev.name = d.Type, d.Object.Metadata.Name
			case line == "" && ev.typ != "":
				s.events <- ev
				ev = idEvent{}
			}
		}
	}()
	return s
}

func (s *idStream) take(t *testing.T, n int) []idEvent {
	t.Helper()
	var out []idEvent
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-s.events:
			require.True(t, ok, "stream closed after %d of %d events", len(out), n)
			require.NotEqual(t, "ERROR", ev.typ)
			out = append(out, ev)
		case <-deadline:
			t.Fatalf("%d of %d events within 10s", len(out), n)
		}
	}
	return out
}

func (s *idStream) expectNone(t *testing.T, d time.Duration) {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if ok {
			t.Fatalf("unexpected event %v", ev)
		}
	case <-time.After(d):
	}
}

func (s *idStream) close() { s.resp.Body.Close() }

// TestEtcdDownAnswersInTime: with etcd stopped no request hangs past 5 s: they answer 503 or
// 504 Statuses naming etcd (reads at resourceVersion 0 answer from the cache), /readyz is 503
// with the reason and /healthz stays 200; with etcd back, writes succeed again within seconds
// and nothing acknowledged before is lost, without restarting opemu.
func TestEtcdDownAnswersInTime(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	r := etcdReplica(t, "down-1", e, "/down", "ENABLE_CONTROLLER=false")
	code, _ := request.JSON(t, "POST", r.url(appsPath), appBody("kept", 1))
	require.Equal(t, http.StatusCreated, code)

	e.Kill(t)
	requests := []struct{ method, path, body string }{
		{"GET", appsPath + "/kept", ""},
		{"GET", appsPath, ""},
		{"POST", appsPath, appBody("during", 1)},
		{"PUT", appsPath + "/kept", appBody("kept", 3)},
		{"DELETE", appsPath + "/kept", ""},
		{"POST", "/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"new"}}`},
	}
	var wg sync.WaitGroup
	for _, rq := range requests {
		wg.Go(func() {
			start := time.Now()
			code, obj := request.JSON(t, rq.method, r.url(rq.path), rq.body)
			took := time.Since(start)
			assert.Less(t, took, 5*time.Second, "%s %s answered in %v", rq.method, rq.path, took)
			assert.Contains(t, []int{http.StatusServiceUnavailable, http.StatusGatewayTimeout}, code, "%s %s: %v", rq.method, rq.path, obj)
			assert.Equal(t, "Status", obj["kind"])
			assert.Contains(t, obj["message"], "etcd")
		})
	}
	wg.Wait()
	code, body := rawGet(t, r.url(appsPath+"/kept?resourceVersion=0"))
	assert.Equal(t, http.StatusOK, code, "resourceVersion=0 reads the cache: %s", body)
	code, obj := request.JSON(t, "GET", r.url("/readyz"), "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, obj["reason"], "etcd")
	code, _ = request.JSON(t, "GET", r.url("/healthz"), "")
	assert.Equal(t, http.StatusOK, code)

	e.Restart(t)
	back := time.Now()
	require.Eventually(t, func() bool {
		code, _ := request.JSON(t, "POST", r.url(appsPath), appBody("after", 1))
		return code == http.StatusCreated
	}, 20*time.Second, 100*time.Millisecond, "writes succeed again")
	t.Logf("writes succeed %v after etcd is back", time.Since(back))
	_, _, rv := appStatus(t, r, "kept")
	assert.NotEmpty(t, rv, "the write acknowledged before the outage is there")
	require.Eventually(t, func() bool { return r.readyz() == http.StatusOK }, 10*time.Second, 50*time.Millisecond)
}

// TestEtcdEventsAreBoundedByTheirLease: on etcd, EVENT_LIMIT does not apply (SPEC §12): every
// Event is kept, the server's and a client's, each with an etcd lease of EVENT_TTL (plus the
// lease manager's reuse window of 5%), as kube-apiserver bounds them.
func TestEtcdEventsAreBoundedByTheirLease(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	r := etcdReplica(t, "ev-1", e, "/ev", "ENABLE_CONTROLLER=false", "EVENT_LIMIT=5", "EVENT_TTL=10m")
	for i := range 12 {
		body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"client-%d"},"involvedObject":{"kind":"Pod","name":"p"},"reason":"Client"}`, i)
		code, obj := request.JSON(t, "POST", r.url("/api/v1/namespaces/default/events"), body)
		require.Equal(t, http.StatusCreated, code, "%v", obj)
	}
	for i := range 3 {
		code, obj := request.JSON(t, "POST", r.url(appsPath), appBody(fmt.Sprint("app-", i), 1))
		require.Equal(t, http.StatusCreated, code, "%v", obj)
	}
	eventually(t, 15, func() int {
		_, list := request.JSON(t, "GET", r.url("/api/v1/namespaces/default/events?fieldSelector=reason!%3DLeaderElection"), "")
		items, _ := list["items"].([]any)
		return len(items)
	}, "12 client Events and 3 Created Events (and the elector's), beyond EVENT_LIMIT")

	client := e.Client(t)
	ctx := t.Context()
	res, err := client.Get(ctx, "/ev/core/events/default/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, res.Kvs, 16)
	for _, kv := range res.Kvs {
		require.NotZero(t, kv.Lease, "%s has a lease", kv.Key)
		ttl, err := client.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
		require.NoError(t, err)
		assert.GreaterOrEqual(t, ttl.GrantedTTL, int64(600), "%s", kv.Key)
		assert.LessOrEqual(t, ttl.GrantedTTL, int64(630), "%s", kv.Key)
	}
}

// TestOpemuEtcd: `opemu etcd` serves a one-member etcd a replica can use, keeps its data in
// --data-dir across a restart, and exits 0 on SIGTERM.
func TestOpemuEtcd(t *testing.T) {
	t.Parallel()
	bin := binary
	dir := t.TempDir()
	client, peer := portOf(freePort(t)), portOf(freePort(t))
	startEtcd := func() (*exec.Cmd, *etcdtest.Server) {
		cmd := exec.Command(bin, "etcd", "--data-dir", filepath.Join(dir, "data"),
			"--listen-client-urls", "http://127.0.0.1:"+client, "--listen-peer-urls", "http://127.0.0.1:"+peer)
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line := make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			if sc.Scan() {
				line <- sc.Text()
			}
			_, _ = io.Copy(io.Discard, out)
		}()
		select {
		case l := <-line:
			require.Contains(t, l, "etcd ready client-urls=http://127.0.0.1:"+client)
		case <-time.After(30 * time.Second):
			t.Fatal("opemu etcd not ready within 30s")
		}
		return cmd, &etcdtest.Server{Endpoint: "http://127.0.0.1:" + client}
	}
	cmd, e := startEtcd()
	r := etcdReplica(t, "embedded-1", e, "/embedded", "ENABLE_CONTROLLER=false")
	code, _ := request.JSON(t, "POST", r.url(appsPath), appBody("kept", 1))
	require.Equal(t, http.StatusCreated, code)
	require.NoError(t, r.p.cmd.Process.Signal(syscall.SIGTERM))
	r.p.wait(t, 10*time.Second)
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		require.NoError(t, err, "opemu etcd exits 0 on SIGTERM")
	case <-time.After(10 * time.Second):
		t.Fatal("opemu etcd did not exit within 10s of SIGTERM")
	}
	_, e = startEtcd()
	r = etcdReplica(t, "embedded-2", e, "/embedded", "ENABLE_CONTROLLER=false")
	_, _, rv := appStatus(t, r, "kept")
	assert.NotEmpty(t, rv, "the data survived a restart of opemu etcd")
}

// portOf is the port of a host:port.
func portOf(addr string) string { return addr[strings.LastIndex(addr, ":")+1:] }

// TestEtcdReplicaStartsWithoutEtcd: a replica started while etcd is down serves at once: /healthz
// 200, /readyz 503 naming etcd, every other request a 503 Status saying it waits for etcd; it
// waits past etcd's start timeout (10 s) instead of exiting, and becomes ready by itself once
// etcd answers, its system namespaces there. (kube-apiserver v1.37.2 exits when etcd is not
// there at its start: "error creating storage factory: etcd grpc connection not ready".)
func TestEtcdReplicaStartsWithoutEtcd(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	e.Kill(t)
	r := startEtcdReplica(t, "nostart-1", e.Endpoint, "/nostart", "/healthz", "ENABLE_CONTROLLER=false")

	code, obj := request.JSON(t, "GET", r.url("/readyz"), "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, obj["reason"], "etcd")
	code, body := rawGet(t, r.url("/readyz?verbose"))
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, string(body), "[-]etcd failed")
	start := time.Now()
	code, obj = request.JSON(t, "POST", r.url(appsPath), appBody("early", 1))
	assert.Less(t, time.Since(start), 5*time.Second)
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Equal(t, "Status", obj["kind"])
	assert.Contains(t, obj["message"], "waiting for etcd")

	// It waits as long as etcd takes: past the 10 s it gave etcd before, it still answers.
	deadline := time.Now().Add(11 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-r.p.exited:
			t.Fatalf("the replica exited while etcd was down; logs:\n%s", r.p.logs())
		case <-time.After(500 * time.Millisecond):
		}
		code, _ := request.JSON(t, "GET", r.url("/healthz"), "")
		require.Equal(t, http.StatusOK, code)
		assert.Equal(t, http.StatusServiceUnavailable, r.readyz())
	}

	e.Restart(t)
	back := time.Now()
	require.Eventually(t, func() bool { return r.readyz() == http.StatusOK }, 20*time.Second, 50*time.Millisecond,
		"ready once etcd answers; logs:\n%s", r.p.logs())
	t.Logf("ready %v after etcd is back", time.Since(back))
	code, obj = request.JSON(t, "POST", r.url(appsPath), appBody("after", 1))
	assert.Equal(t, http.StatusCreated, code, "%v", obj)
	code, _ = request.JSON(t, "GET", r.url("/api/v1/namespaces/kube-system"), "")
	assert.Equal(t, http.StatusOK, code)
}

// TestEtcdFullReplicaStarts: a replica starting over a full etcd (its NOSPACE alarm raised:
// every write refused) starts and serves what exists; the system namespaces and built-in
// objects that exist are never written again, so they are no error. Once the alarm is
// disarmed, writes succeed.
func TestEtcdFullReplicaStarts(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	first := etcdReplica(t, "full-1", e, "/full", "ENABLE_CONTROLLER=false")
	require.Eventually(t, func() bool { return first.readyz() == http.StatusOK }, 20*time.Second, 50*time.Millisecond)

	c := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	members, err := c.MemberList(ctx)
	require.NoError(t, err)
	id := members.Members[0].ID
	_, err = etcdserverpb.NewMaintenanceClient(c.ActiveConnection()).Alarm(ctx, &etcdserverpb.AlarmRequest{
		Action: etcdserverpb.AlarmRequest_ACTIVATE, MemberID: id, Alarm: etcdserverpb.AlarmType_NOSPACE})
	require.NoError(t, err)
	_, err = c.Put(ctx, "/probe", "x")
	require.Error(t, err, "etcd refuses writes")

	r := etcdReplica(t, "full-2", e, "/full", "ENABLE_CONTROLLER=false")
	code, _ := request.JSON(t, "GET", r.url("/api/v1/namespaces/default"), "")
	assert.Equal(t, http.StatusOK, code, "it serves what exists")
	select {
	case <-r.p.exited:
		t.Fatalf("the replica exited over a full etcd; logs:\n%s", r.p.logs())
	case <-time.After(2 * time.Second):
	}
	code, obj := request.JSON(t, "POST", r.url(appsPath), appBody("full", 1))
	assert.GreaterOrEqual(t, code, 400, "a write to a full etcd is refused: %v", obj)
	assert.Equal(t, "Status", obj["kind"])

	_, err = c.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: id, Alarm: etcdserverpb.AlarmType_NOSPACE})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		code, _ := request.JSON(t, "POST", r.url(appsPath), appBody("room", 1))
		return code == http.StatusCreated
	}, 20*time.Second, 100*time.Millisecond, "writes succeed once etcd has room")
}

// TestEtcdClusterLosesMembers: three replicas over a three-member etcd keep serving while a
// member is killed (a follower, then, once it is back, the leader every write goes through):
// every request is answered within 5 s, writes succeed again within seconds of each loss
// without restarting anything, and no acknowledged write is lost.
func TestEtcdClusterLosesMembers(t *testing.T) {
	t.Parallel()
	members := etcdtest.StartCluster(t, 3)
	var endpoints []string
	for _, m := range members {
		endpoints = append(endpoints, m.Endpoint)
	}
	var rs []*replica
	for i := range 3 {
		rs = append(rs, etcdReplicaOf(t, fmt.Sprintf("cluster-%d", i), strings.Join(endpoints, ","), "/cluster", "ENABLE_CONTROLLER=false"))
	}
	for _, r := range rs {
		require.Eventually(t, func() bool { return r.readyz() == http.StatusOK }, 30*time.Second, 50*time.Millisecond)
	}
	client := members[0].Client(t)
	leader := func() int {
		t.Helper()
		for i, m := range members {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := client.Status(ctx, m.Endpoint)
			cancel()
			if err == nil && st.Header.MemberId == st.Leader {
				return i
			}
		}
		return -1
	}

	// One writer, round-robin over the replicas: what each write answered, and when.
	type write struct {
		name string
		code int
		at   time.Time
	}
	var mu sync.Mutex
	var writes []write
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			name := fmt.Sprintf("cm-%d", i)
			start := time.Now()
			code, _ := request.JSON(t, "POST", rs[i%3].url("/api/v1/namespaces/default/configmaps"),
				fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q}}`, name))
			if took := time.Since(start); took >= 5*time.Second {
				t.Errorf("POST %s answered in %v", name, took)
			}
			mu.Lock()
			writes = append(writes, write{name, code, time.Now()})
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	})
	// succeedsAfter waits until a write made after at succeeds.
	succeedsAfter := func(at time.Time, what string) {
		t.Helper()
		require.Eventually(t, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, w := range writes {
				if w.at.After(at) && w.code == http.StatusCreated {
					return true
				}
			}
			return false
		}, 15*time.Second, 50*time.Millisecond, "writes succeed again after %s", what)
		t.Logf("writes succeed %v after %s", time.Since(at).Round(time.Millisecond), what)
	}
	succeedsAfter(time.Now(), "the start")

	l := leader()
	require.GreaterOrEqual(t, l, 0, "the cluster has a leader")
	follower := (l + 1) % 3
	members[follower].Kill(t)
	succeedsAfter(time.Now(), "a follower's death")
	members[follower].Restart(t)
	succeedsAfter(time.Now(), "the follower's return")

	l = leader()
	require.GreaterOrEqual(t, l, 0)
	members[l].Kill(t)
	succeedsAfter(time.Now(), "the leader's death")
	members[l].Restart(t)
	succeedsAfter(time.Now(), "the old leader's return")
	close(stop)
	wg.Wait()

	// Every acknowledged write is there, through every replica.
	mu.Lock()
	defer mu.Unlock()
	acked := 0
	for _, r := range rs {
		code, obj := request.JSON(t, "GET", r.url("/api/v1/namespaces/default/configmaps"), "")
		require.Equal(t, http.StatusOK, code)
		have := map[string]bool{}
		for _, it := range obj["items"].([]any) {
			have[it.(map[string]any)["metadata"].(map[string]any)["name"].(string)] = true
		}
		acked = 0
		for _, w := range writes {
			if w.code == http.StatusCreated {
				acked++
				assert.True(t, have[w.name], "%s: the acknowledged %s is lost", r.name, w.name)
			}
		}
	}
	t.Logf("%d writes, %d acknowledged", len(writes), acked)
}
