package e2e

import (
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// TestHookControllerLeaderAndLoop: a Controller's queue runs only on the leader (a follower's
// hook is never called and its /reconcile answers 503), and it pauses, steps and resumes by
// its name like the built-in controller.
func TestHookControllerLeaderAndLoop(t *testing.T) {
	t.Parallel()
	lease := filepath.Join(t.TempDir(), "hooks.lease")
	rs := []*replica{startReplica(t, "hooks-1", lease, "RECONCILE_INTERVAL=0"), startReplica(t, "hooks-2", lease, "RECONCILE_INTERVAL=0")}
	leader, _ := waitLeader(t, 2*haRetry, rs...)
	follower := without(rs, leader)[0]

	// Each replica keeps its own objects (memory store): both get the CRD, a Controller calling
	// their own hook, and a Gadget.
	calls := map[*replica]*atomic.Int64{}
	for _, r := range rs {
		n := &atomic.Int64{}
		calls[r] = n
		hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			n.Add(1)
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"status":{"phase":"Ready"}}`)
		}))
		t.Cleanup(hook.Close)
		request.CreateGadgets(t, "http://"+r.p.addr, hook.URL)
	}
	api := func(r *replica) string {
		return "http://" + r.p.addr + "/apis/example.com/v1/namespaces/default/gadgets"
	}
	require.Eventually(t, func() bool { return calls[leader].Load() > 0 }, 10*time.Second, 20*time.Millisecond, "the leader's queue calls its hook")
	// The follower learns who leads at its next look at the lease (RETRY_PERIOD).
	require.Eventually(t, func() bool { v, ok := follower.view(); return ok && v.Leader == leader.name }, 5*time.Second, 20*time.Millisecond, "the follower sees the leader")
	code, body := request.JSON(t, "POST", api(follower)+"/g1/reconcile", "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	assert.Contains(t, body["message"], leader.name)
	assert.Never(t, func() bool { return calls[follower].Load() > 0 }, 500*time.Millisecond, 50*time.Millisecond, "a follower calls no hook")

	// Pause by name: a change waits in the queue; a step reconciles it; resume.
	base := "http://" + leader.p.addr
	code, _ = request.JSON(t, "POST", base+"/controller/pause?controller=gadgets", "")
	require.Equal(t, http.StatusOK, code)
	before := calls[leader].Load()
	req, err := http.NewRequest(http.MethodPatch, api(leader)+"/g1", strings.NewReader(`{"spec":{"size":2}}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Eventually(t, func() bool {
		c := request.Get(t, base+"/controller?controller=gadgets")["controllers"].([]any)[0].(map[string]any)
		q := c["queue"].([]any)
		return c["paused"] == true && len(q) == 1 && q[0].(map[string]any)["state"] == "due"
	}, 5*time.Second, 20*time.Millisecond)
	assert.Equal(t, before, calls[leader].Load(), "paused: nothing reconciled")
	code, step := request.JSON(t, "POST", base+"/controller/step?controller=gadgets", "")
	require.Equal(t, http.StatusOK, code, "%v", step)
	s := step["step"].(map[string]any)
	assert.Equal(t, "gadgets", s["controller"])
	assert.Equal(t, "default/g1", s["object"])
	assert.Equal(t, "success", s["result"])
	assert.Equal(t, before+1, calls[leader].Load(), "one step, one call")
	code, _ = request.JSON(t, "POST", base+"/controller/resume?controller=gadgets", "")
	require.Equal(t, http.StatusOK, code)
	h := request.History(t, api(leader), "g1")
	require.NotEmpty(t, h)
	assert.Equal(t, "gadgets", h[len(h)-1].(map[string]any)["controller"])
}
