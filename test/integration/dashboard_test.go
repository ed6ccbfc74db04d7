package integration

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/browser"
	"github.com/opemu/opemu/test/internal/request"
	"github.com/opemu/opemu/test/internal/tool"
)

var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite docs/dashboard.png")

// historyLen is how many reconcile passes the API's history of Application default/name holds.
func historyLen(t *testing.T, addr, name string) int {
	t.Helper()
	code, h := request.JSON(t, "GET", "http://"+addr+"/apis/cloudnative.elide.dev/v1/namespaces/default/applications/"+name+"/history", "")
	require.Equal(t, http.StatusOK, code)
	items, _ := h["items"].([]any)
	return len(items)
}

// TestDashboard loads /ui/ in headless Chromium, creates an Application through the form, sees
// it reach Running in the table; then restarts the server and sees the page re-list.
func TestDashboard(t *testing.T) {
	t.Parallel()
	// No periodic resync: every reconcile pass in this test has a cause the test knows.
	env := []string{"ROLLOUT_STEP=300ms", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0"}
	p := start(t, env...)
	addr := p.addr
	ctx := browser.Start(t)
	// The first action starts the browser; it must not run under a timeout (chromedp.Run).
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	// Every page records what its Content-Security-Policy blocked: the dashboard must work
	// under its own policy, with nothing blocked.
	require.NoError(t, chromedp.Do(ctx, chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
			Source: `window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", e => window.__cspViolations.push(e.violatedDirective + " " + e.blockedURI));`,
		})
		return err
	})))
	run := func(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		require.NoError(t, chromedp.Do(c, actions...))
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	run(30*time.Second,
		chromedp.Navigate("http://"+addr+"/ui/"),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.SetValue(css("#new-name"), "web"),
		chromedp.SetValue(css("#new-replicas"), "3"),
		chromedp.Click(css("#create-btn")),
		chromedp.WaitVisible(css(`tr[data-name="web"]`)),
		chromedp.WaitVisible(css(`tr[data-name="web"][data-phase="Running"]`)),
	)
	tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	ready, err := chromedp.Run(tctx, chromedp.Text(css(`tr[data-name="web"] td.ready`)))
	cancel()
	require.NoError(t, err)
	require.Equal(t, "3 / 3", strings.TrimSpace(ready))
	_, leader := request.JSON(t, "GET", "http://"+addr+"/leader", "")
	run(5*time.Second,
		chromedp.WaitVisible(css(`#store`)),
		chromedp.Poll[chromedp.Void](`document.getElementById("store").textContent === "memory" && document.getElementById("replica").textContent === `+strconv.Quote(leader["identity"].(string))),
	)

	// Select it: the detail panel shows history and events from the public API.
	run(15*time.Second,
		chromedp.Click(css(`tr[data-name="web"]`)),
		chromedp.WaitVisible(css(`#detail`)),
		chromedp.WaitVisible(css(`#history tbody tr`)),
		chromedp.WaitVisible(css(`#events tbody tr`)),
	)
	// "Reconcile now" on the converged object: the pass finds nothing to do, and the history
	// shows it on top.
	passes := historyLen(t, addr, "web")
	poll := func(expr string) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := chromedp.Run(c, chromedp.Poll[bool](expr))
		require.NoError(t, err, "waiting for %s", expr)
	}
	poll(fmt.Sprintf(`document.querySelectorAll("#history tbody tr").length === %d`, passes))
	run(5*time.Second, chromedp.Click(css("#reconcile")))
	poll(fmt.Sprintf(`document.querySelectorAll("#history tbody tr").length === %d`, passes+1))
	poll(`document.querySelector("#history tbody tr").classList.contains("idle") &&
		document.querySelector("#history tbody tr").textContent.includes("nothing to do")`)
	assert.Equal(t, passes+1, historyLen(t, addr, "web"))

	if *updateScreenshot {
		sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
		cancel()
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(tool.Repo(t), "docs", "dashboard.png"), png, 0o644))
	}

	// Restart the server on the same address: the page reconnects, gets the expired ERROR for
	// its old Last-Event-ID, and re-lists: the old object is gone, a new one appears.
	require.NoError(t, p.stop())
	p2 := start(t, append(env, "ADDR="+addr)...)
	require.Equal(t, addr, p2.addr)
	resp, err := http.Post("http://"+addr+"/apis/cloudnative.elide.dev/v1/namespaces/default/applications", "application/json",
		strings.NewReader(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"after-restart"},"spec":{"replicas":1,"image":"nginx:1.27"}}`))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	run(30*time.Second,
		chromedp.WaitVisible(css(`tr[data-name="after-restart"]`)),
		chromedp.WaitNotPresent(css(`tr[data-name="web"]`)),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(css(`#timeline li.t-ERROR`)),
	)
	vctx, cancelV := context.WithTimeout(ctx, 5*time.Second)
	violations, err := chromedp.Run(vctx, chromedp.Evaluate[[]string]("window.__cspViolations"))
	cancelV()
	require.NoError(t, err)
	require.Empty(t, violations, "the Content-Security-Policy blocked nothing the dashboard does")
	fmt.Fprintln(os.Stderr, "dashboard: reconnected and re-listed after a restart")
}

// TestDashboardLoopAndFaults drives SPEC §16 from the dashboard in headless Chromium: pause the
// controller, create an Application that waits in the queue, step it, advance the manual clock,
// step again to Running; then create a Fault from the page, meet it when creating an
// Application, see it counted, and delete it.
func TestDashboardLoopAndFaults(t *testing.T) {
	t.Parallel()
	p := start(t, "CLOCK=manual", "ROLLOUT_STEP=1s", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	ctx := browser.Start(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	run := func(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		require.NoError(t, chromedp.Do(c, actions...))
	}
	text := func(sel string) string {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return strings.TrimSpace(s)
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	run(30*time.Second,
		chromedp.Navigate("http://"+p.addr+"/ui/"),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(css(`#loop-state[data-state="running"]`)),
		chromedp.WaitVisible(css(`#clock-mode[data-mode="manual"]`)),
		chromedp.Click(css("#pause")),
		chromedp.WaitVisible(css(`#loop-state[data-state="paused"]`)),
		chromedp.SetValue(css("#new-name"), "stepped"),
		chromedp.SetValue(css("#new-replicas"), "1"),
		chromedp.Click(css("#create-btn")),
		chromedp.WaitVisible(css(`tr[data-name="stepped"][data-phase=""]`)),
		chromedp.WaitVisible(css(`#queue tr[data-object="default/stepped"][data-state="due"]`)),
	)
	// One step: the finalizer and the new generation, phase Pending; the next rollout step
	// waits a second on the manual clock.
	run(15*time.Second,
		chromedp.Click(css("#step")),
		chromedp.WaitVisible(css(`tr[data-name="stepped"][data-phase="Pending"]`)),
	)
	assert.Contains(t, text("#step-result"), "stepped application default/stepped: success")
	before := text("#clock-now")
	run(15*time.Second,
		chromedp.SetValue(css("#advance-by"), "1s"),
		chromedp.Click(css("#advance")),
		chromedp.WaitVisible(css(`#queue tr[data-object="default/stepped"][data-state="due"]`)),
	)
	// The page shows the clock moved, once it has asked /clock again.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	moved, err := chromedp.Run(pctx, chromedp.Poll[bool](fmt.Sprintf(`document.getElementById("clock-now").textContent !== %q`, before)))
	cancel()
	require.NoError(t, err)
	assert.True(t, moved, "the clock moved")
	run(15*time.Second,
		chromedp.Click(css("#step")),
		chromedp.WaitVisible(css(`tr[data-name="stepped"][data-phase="Running"]`)),
	)
	assert.Equal(t, "1 / 1", text(`tr[data-name="stepped"] td.ready`))

	// A Fault made on the page: creates of Applications answer 503 once.
	run(15*time.Second,
		chromedp.SetValue(css("#fault-name"), "no-creates"),
		chromedp.SetValue(css("#fault-verbs"), "create"),
		chromedp.SetValue(css("#fault-resource"), "applications"),
		chromedp.SetValue(css("#fault-status"), "503"),
		chromedp.SetValue(css("#fault-count"), "1"),
		chromedp.Click(css("#fault-create")),
		chromedp.WaitVisible(css(`#fault-list tr[data-fault="no-creates"][data-phase="Active"]`)),
		chromedp.SetValue(css("#new-name"), "refused"),
		chromedp.Click(css("#create-btn")),
		chromedp.WaitVisible(css(`#message.error`)),
		chromedp.WaitVisible(css(`#fault-list tr[data-fault="no-creates"][data-phase="Exhausted"]`)),
	)
	assert.Contains(t, text("#message"), `503 ServiceUnavailable: injected by Fault "no-creates"`)
	assert.Equal(t, "1", text(`#fault-list tr[data-fault="no-creates"] td.injected`))
	run(15*time.Second,
		chromedp.Click(css(`#fault-list button.fault-delete[data-name="no-creates"]`)),
		chromedp.WaitNotPresent(css(`#fault-list tr[data-fault="no-creates"]`)),
		chromedp.Click(css("#resume")),
		chromedp.WaitVisible(css(`#loop-state[data-state="running"]`)),
	)
	resp, err := http.Get("http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications/refused")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode, "the refused create stored nothing")
}

// TestDashboardHooks: the page lists the Controllers, marks the objects a hook reconciles and
// shows their reconcile history.
func TestDashboardHooks(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"status":{"phase":"Ready"}}`)
	}))
	t.Cleanup(hook.Close)
	p := start(t, "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	base := "http://" + p.addr
	request.CreateGadgets(t, base, hook.URL)
	ctx := browser.Start(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	c, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	require.NoError(t, chromedp.Do(c,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(css(`#hook-list tr[data-controller="gadgets"][data-phase="Running"]`)),
		chromedp.WaitVisible(css(`#objects tr[data-name="g1"][data-hooked="gadgets"][data-phase="Ready"]`)),
		chromedp.Click(css(`#objects tr[data-name="g1"]`)),
		chromedp.WaitVisible(css(`#history tbody tr[data-controller="gadgets"]`)),
	))
	s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(`#hook-list tr[data-controller="gadgets"]`)))
	require.NoError(t, err)
	assert.Contains(t, s, hook.URL)
	assert.Contains(t, s, "Reconciling gadgets (Gadget)")
}

// TestDashboardSnapshot: the page saves a snapshot (and offers it as a file), the Application
// is deleted, and the page's Reset puts it back: the same uid, listed again by the page, whose
// stream ended with the restore's 410 and re-listed.
func TestDashboardSnapshot(t *testing.T) {
	t.Parallel()
	p := start(t, "ROLLOUT_STEP=0", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	api := p.url("/apis/cloudnative.elide.dev/v1/namespaces/default/applications")
	code, created := request.JSON(t, "POST", api, `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"kept"},"spec":{"replicas":2,"image":"nginx:1.27"}}`)
	require.Equal(t, http.StatusCreated, code)
	uid := created["metadata"].(map[string]any)["uid"]
	ctx := browser.Start(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	run := func(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		require.NoError(t, chromedp.Do(c, actions...))
	}
	text := func(sel string) string {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		s, err := chromedp.Run(c, chromedp.Text(chromedp.CSS(sel)))
		require.NoError(t, err)
		return strings.TrimSpace(s)
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }

	run(30*time.Second,
		chromedp.Navigate(p.url("/ui/")),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(css(`tr[data-name="kept"][data-phase="Running"]`)),
		chromedp.Click(css("#snap-save")),
		chromedp.WaitEnabled(css("#snap-reset")),
		chromedp.WaitVisible(css("#snap-download")),
	)
	assert.Regexp(t, `^saved \d+ objects at resourceVersion \d+$`, text("#snap-result"))
	assert.Regexp(t, `^download opemu-snapshot-\d{8}-\d{6}\.yaml$`, text("#snap-download"))

	code, _ = request.JSON(t, "DELETE", api+"/kept", "")
	require.Equal(t, http.StatusOK, code)
	run(15*time.Second, chromedp.WaitNotPresent(css(`tr[data-name="kept"]`)))

	run(15*time.Second,
		chromedp.Click(css("#snap-reset")),
		chromedp.WaitVisible(css(`tr[data-name="kept"][data-phase="Running"]`)),
	)
	assert.Regexp(t, `^restored \d+ objects at resourceVersion \d+$`, text("#snap-result"))
	back := request.Get(t, api+"/kept")
	assert.Equal(t, uid, back["metadata"].(map[string]any)["uid"], "the same object, uid and all")
	assert.Contains(t, text("#timeline"), "ERROR Status Expired", "the stream ended with the restore's 410 and the page re-listed")

	// A file that is not a snapshot: the answer's Status on the page, nothing changed.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("- just\n- a list\n"), 0o600))
	run(15*time.Second,
		chromedp.SetUploadFiles(css("#snap-file"), []string{bad}),
		chromedp.WaitVisible(css("#snap-result.error")),
	)
	assert.Equal(t, "400 BadRequest: snapshot: document 1: not an object", text("#snap-result"))
	assert.Equal(t, uid, request.Get(t, api+"/kept")["metadata"].(map[string]any)["uid"])
}
