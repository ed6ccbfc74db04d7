package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// Time you can stop (SPEC §16), as a user meets it: the controller paused, stepped and resumed
// over HTTP, and a manual clock that moves only when asked.

// sseEvent is one change from GET /watch.
type sseEvent struct {
	Type   string         `json:"type"`
	Object map[string]any `json:"object"`
}

// openSSE streams url's events into a channel until the test ends.
func openSSE(t *testing.T, url string) <-chan sseEvent {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	t.Cleanup(func() { cancel(); resp.Body.Close() })
	ch := make(chan sseEvent, 1000)
	go func() {
		defer close(ch)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var ev sseEvent
				if json.Unmarshal([]byte(data), &ev) == nil {
					ch <- ev
				}
			}
		}
	}()
	return ch
}

// nextEvent returns the next event, failing after 5 s.
func nextEvent(t *testing.T, ch <-chan sseEvent) sseEvent {
	t.Helper()
	select {
	case ev, ok := <-ch:
		require.True(t, ok, "the stream ended")
		return ev
	case <-time.After(5 * time.Second):
		t.Fatal("no event within 5 s")
		return sseEvent{}
	}
}

// quiet asserts that no event arrives for d.
func quiet(t *testing.T, ch <-chan sseEvent, d time.Duration, why string) {
	t.Helper()
	select {
	case ev := <-ch:
		t.Fatalf("%s, but the watch saw %s %v", why, ev.Type, ev.Object["status"])
	case <-time.After(d):
	}
}

// reconciles is controller_reconcile_total of the application controller, every result.
func reconciles(t *testing.T, base string) int {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	n := 0.0
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, `controller_reconcile_total{controller="application"`) {
			var v float64
			fmt.Sscan(l[strings.LastIndex(l, " ")+1:], &v)
			n += v
		}
	}
	return int(n)
}

// TestControllerPauseStepResume: with the controller paused, a new Application stays
// unreconciled and its key waits in the queue; each step is exactly one reconcile, seen in the
// history and in the watch, and nothing moves between steps; resume finishes the rollout.
func TestControllerPauseStepResume(t *testing.T) {
	t.Parallel()
	const rolloutStep = 200 * time.Millisecond
	p := start(t, "ROLLOUT_STEP="+rolloutStep.String(), "ENABLE_LEADER_ELECTION=false")
	base := "http://" + p.addr
	api := base + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	require.Eventually(t, func() bool { _, running, _ := request.Queue(t, base); return running }, 5*time.Second, 10*time.Millisecond)

	code, m := request.JSON(t, "POST", base+"/controller/pause", "")
	require.Equal(t, http.StatusOK, code, "%v", m)
	paused, _, _ := request.Queue(t, base)
	require.True(t, paused)
	events := openSSE(t, base+"/watch?kind=Application")
	code, _ = request.JSON(t, "POST", api, request.AppJSON) // web, 2 replicas
	require.Equal(t, http.StatusCreated, code)
	assert.Equal(t, "ADDED", nextEvent(t, events).Type)

	// The controller's own watch and the SSE stream are separate watchers: the key may be
	// queued a moment after the event reaches this one.
	var queue map[string]map[string]any
	require.Eventually(t, func() bool {
		_, _, queue = request.Queue(t, base)
		return queue["default/web"] != nil
	}, 5*time.Second, 5*time.Millisecond, "the queue shows the key")
	assert.Equal(t, "due", queue["default/web"]["state"])
	assert.EqualValues(t, 0, queue["default/web"]["failures"])
	quiet(t, events, 3*rolloutStep, "paused: nothing may change")
	obj := request.Get(t, api+"/web")
	assert.Nil(t, obj["status"], "unreconciled")
	assert.Nil(t, obj["metadata"].(map[string]any)["finalizers"])
	assert.Empty(t, request.History(t, api, "web"))
	assert.Zero(t, reconciles(t, base))

	// The first step: one reconcile, which adds the finalizer and observes the generation.
	code, m = request.JSON(t, "POST", base+"/controller/step", "")
	require.Equal(t, http.StatusOK, code, "%v", m)
	step := m["step"].(map[string]any)
	assert.Equal(t, "application", step["controller"])
	assert.Equal(t, "default/web", step["object"])
	assert.Equal(t, "success", step["result"])
	assert.Equal(t, 1, reconciles(t, base))
	require.Len(t, request.History(t, api, "web"), 1)
	ev := nextEvent(t, events)
	assert.Equal(t, "MODIFIED", ev.Type)
	assert.Equal(t, []any{"cloudnative.elide.dev/finalizer"}, ev.Object["metadata"].(map[string]any)["finalizers"])
	ev = nextEvent(t, events)
	assert.EqualValues(t, 1, ev.Object["status"].(map[string]any)["observedGeneration"])
	assert.Equal(t, "Pending", ev.Object["status"].(map[string]any)["phase"])
	quiet(t, events, 3*rolloutStep, "paused again after the step")
	assert.Equal(t, 1, reconciles(t, base))

	// The second step, once the next rollout step is due: one more replica ready.
	code, m = request.JSON(t, "POST", base+"/controller/step", "")
	require.Equal(t, http.StatusOK, code, "%v", m)
	assert.Equal(t, 2, reconciles(t, base), "exactly one reconcile per step")
	require.Len(t, request.History(t, api, "web"), 2)
	ev = nextEvent(t, events)
	assert.EqualValues(t, 1, ev.Object["status"].(map[string]any)["readyReplicas"])
	quiet(t, events, 3*rolloutStep, "paused again after the step")

	// Resume: the controller finishes the rollout on its own.
	code, m = request.JSON(t, "POST", base+"/controller/resume", "")
	require.Equal(t, http.StatusOK, code, "%v", m)
	require.Eventually(t, func() bool {
		st, _ := request.Get(t, api+"/web")["status"].(map[string]any)
		return st["phase"] == "Running" && st["readyReplicas"] == float64(2)
	}, 10*time.Second, 20*time.Millisecond)
	paused, _, _ = request.Queue(t, base)
	assert.False(t, paused)

	// Nothing due: a step says so, and pauses. (The node lifecycle controller always has its
	// Node's next health check waiting, as kube's polls its Nodes: the Application's queue is
	// the one stepped here.)
	require.Eventually(t, func() bool { _, _, q := request.Queue(t, base); return len(q) == 0 }, 5*time.Second, 10*time.Millisecond)
	code, m = request.JSON(t, "POST", base+"/controller/step?controller=application", "")
	assert.Equal(t, http.StatusConflict, code)
	assert.Equal(t, "nothing to step: the queue is empty", m["message"])
	code, m = request.JSON(t, "POST", base+"/controller/step?controller=gc", "")
	assert.Equal(t, http.StatusNotFound, code)
	assert.Equal(t, `no controller named "gc" (controllers: application, cronjob, daemonset, deployment, endpointslice, job, node, pod, replicaset, statefulset)`, m["message"])
}

// TestManualClockRetries: with CLOCK=manual, a failing Application is retried only when the
// clock is advanced: by 1 s, 2 s and 4 s for the three retries, the third of which succeeds
// (simulate-failures "3"); timestamps of objects, Events and the history follow the clock.
func TestManualClockRetries(t *testing.T) {
	t.Parallel()
	p := start(t, "CLOCK=manual", "ROLLOUT_STEP=0", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	base := "http://" + p.addr
	api := base + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	clockNow := func() time.Time {
		m := request.Get(t, base+"/clock")
		require.Equal(t, "manual", m["mode"])
		at, err := time.Parse(time.RFC3339Nano, m["now"].(string))
		require.NoError(t, err)
		return at
	}
	advance := func(by string) time.Time {
		code, m := request.JSON(t, "POST", base+"/clock/advance", `{"by":"`+by+`"}`)
		require.Equal(t, http.StatusOK, code, "%v", m)
		at, err := time.Parse(time.RFC3339Nano, m["now"].(string))
		require.NoError(t, err)
		return at
	}
	// An hour ahead of the real clock, so that nothing stamped by it could pass for the manual one.
	t0 := clockNow()
	start := advance("1h")
	require.Equal(t, t0.Add(time.Hour), start)
	require.Eventually(t, func() bool { _, running, _ := request.Queue(t, base); return running }, 5*time.Second, 10*time.Millisecond)

	code, _ := request.JSON(t, "POST", api, `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"web",
		"annotations":{"cloudnative.elide.dev/simulate-failures":"3"}},"spec":{"replicas":2,"image":"nginx:1.27"}}`)
	require.Equal(t, http.StatusCreated, code)
	obj := request.Get(t, api+"/web")
	assert.Equal(t, start.UTC().Format(time.RFC3339), obj["metadata"].(map[string]any)["creationTimestamp"])

	// attempts waits for n attempts in the history.
	attempts := func(n int) []any {
		t.Helper()
		var h []any
		require.Eventually(t, func() bool { h = request.History(t, api, "web"); return len(h) == n }, 5*time.Second, 10*time.Millisecond, "attempt %d", n)
		return h
	}
	errorEvent := func() map[string]any {
		t.Helper()
		evs := request.Get(t, base+"/events?name=web&reason=ReconcileError")["events"].([]any)
		require.Len(t, evs, 1, "aggregated into one Event")
		return evs[0].(map[string]any)
	}
	attempts(1)
	// Nothing happens until the clock moves: not after the 1 s backoff of the real clock.
	time.Sleep(1200 * time.Millisecond)
	assert.Len(t, request.History(t, api, "web"), 1)
	_, _, queue := request.Queue(t, base)
	assert.Equal(t, "waiting", queue["default/web"]["state"])
	assert.EqualValues(t, 1, queue["default/web"]["failures"])
	assert.Equal(t, start.Add(time.Second).UTC().Format(time.RFC3339Nano), queue["default/web"]["due"])
	ev := errorEvent()
	assert.EqualValues(t, 1, ev["count"])
	assert.Equal(t, start.UTC().Format(time.RFC3339), ev["lastTimestamp"])

	at := advance("1s")
	attempts(2)
	require.Eventually(t, func() bool { return errorEvent()["count"] == float64(2) }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, at.UTC().Format(time.RFC3339), errorEvent()["lastTimestamp"])

	at = advance("2s")
	attempts(3)
	require.Eventually(t, func() bool { return errorEvent()["count"] == float64(3) }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, at.UTC().Format(time.RFC3339), errorEvent()["lastTimestamp"])
	_, _, queue = request.Queue(t, base)
	assert.EqualValues(t, 3, queue["default/web"]["failures"])
	assert.Equal(t, at.Add(4*time.Second).UTC().Format(time.RFC3339Nano), queue["default/web"]["due"])
	time.Sleep(200 * time.Millisecond)
	assert.Len(t, request.History(t, api, "web"), 3, "not before the 4 s backoff has passed on the clock")

	at = advance("4s")
	require.Eventually(t, func() bool {
		st, _ := request.Get(t, api+"/web")["status"].(map[string]any)
		return st["phase"] == "Running"
	}, 5*time.Second, 10*time.Millisecond)
	h := request.History(t, api, "web")
	require.GreaterOrEqual(t, len(h), 4, "three failures, then the rollout")
	assert.Equal(t, "Running", h[3].(map[string]any)["phase"])
	assert.Equal(t, true, h[3].(map[string]any)["success"])
	// The finalizer the fourth attempt added queues the key once more: a pass with nothing to
	// do, at the same instant on the clock.
	for _, a := range h[4:] {
		assert.Equal(t, "nothing to do", a.(map[string]any)["message"])
		assert.Equal(t, h[3].(map[string]any)["startTime"], a.(map[string]any)["startTime"])
	}
	var starts []time.Time
	for _, a := range h[:4] {
		ts, err := time.Parse(time.RFC3339Nano, a.(map[string]any)["startTime"].(string))
		require.NoError(t, err)
		starts = append(starts, ts)
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
		[]time.Duration{starts[1].Sub(starts[0]), starts[2].Sub(starts[1]), starts[3].Sub(starts[2])}, "the backoff, exactly")
	assert.Equal(t, start.Truncate(time.Millisecond), starts[0].Truncate(time.Millisecond))
	ready := request.Get(t, base+"/events?name=web&reason=Ready")["events"].([]any)
	require.Len(t, ready, 1)
	assert.Equal(t, at.UTC().Format(time.RFC3339), ready[0].(map[string]any)["lastTimestamp"])
}
