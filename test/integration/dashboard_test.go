package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
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

var updateScreenshot = flag.Bool("update-screenshot", false, "rewrite docs/dashboard.png even when it shows the current dashboard")

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
	page := browser.NewPage(t, ctx)
	run, text, count := page.Do, page.Text, page.Count
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
		chromedp.WaitVisible(css(`tr.selected[data-name="stepped"]`)),
		chromedp.Poll[chromedp.Void](`document.getElementById("story-now").textContent.includes("press Step")`),
	)
	assert.Contains(t, text("#story-now"), "queued, due now")
	assert.Contains(t, text(`#story li.s-watch[data-type="ADDED"]`), "queues its key")
	shots := browser.NewShots(t)
	shots.Take(t, ctx, "paused-queued")
	// One step: the finalizer and the new generation, phase Pending; the next rollout step
	// waits a second on the manual clock. Step was what the hint pointed at: it goes.
	run(15*time.Second,
		chromedp.Click(css("#step")),
		chromedp.WaitVisible(css(`tr[data-name="stepped"][data-phase="Pending"]`)),
		chromedp.WaitNotVisible(css("#hint")),
		chromedp.WaitVisible(css(`#story li.s-pass[data-pass="1"]`)),
	)
	assert.Contains(t, text("#step-result"), "stepped application default/stepped: success")
	assert.Contains(t, text(`#story li.s-pass[data-pass="1"]`), "requeue in 1s")
	shots.Take(t, ctx, "stepped-once")
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
	shots.Take(t, ctx, "stepped-to-running")

	// The Node's heartbeat follows the manual clock: ten seconds bring a renewal of its Lease,
	// which the timeline keeps out of sight until asked for.
	run(15*time.Second,
		chromedp.SetValue(css("#advance-by"), "10s"),
		chromedp.Click(css("#advance")),
		chromedp.Poll[chromedp.Void](`timeline.some(t => t.kind === "Lease" && t.type === "MODIFIED")`),
	)
	assert.Zero(t, count(`#timeline li[data-kind="Lease"]`), "Lease renewals are background traffic, hidden by default")
	assert.Contains(t, text("#timeline-note"), "background events hidden")
	run(10*time.Second,
		chromedp.Click(css("#show-background")),
		chromedp.WaitVisible(css(`#timeline li[data-kind="Lease"]`)),
		chromedp.Click(css("#show-background")),
	)

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

// TestDashboardTeaches follows one Application from the form to Running as someone new to
// operators meets it: the first visit points at Step; what was in the store before the page
// opened is not told as news; "The loop, step by step" tells the watch event, each reconcile
// (why it ran, what it read, what it wrote with the versions the watch then delivers, the
// status, what comes next), then a simulated failure and its retry; Lease renewals and Node
// heartbeats stay out of the timeline until asked for. A screenshot of each moment goes to
// $OPEMU_DASHBOARD_SHOTS, for a person to judge; the one at Running is docs/dashboard.png.
func TestDashboardTeaches(t *testing.T) {
	t.Parallel()
	p := start(t, "ROLLOUT_STEP=700ms", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	base := "http://" + p.addr
	apps := base + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _ := request.JSON(t, "POST", apps, `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"earlier"},"spec":{"replicas":1,"image":"nginx:1.27"}}`)
	require.Equal(t, http.StatusCreated, code)
	require.Eventually(t, func() bool {
		st, _ := request.Get(t, apps+"/earlier")["status"].(map[string]any)
		return st["phase"] == "Running"
	}, 10*time.Second, 50*time.Millisecond)

	ctx := browser.Start(t)
	page := browser.NewPage(t, ctx)
	run, text, count := page.Do, page.Text, page.Count
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shots := browser.NewShots(t)

	// The first visit: the hint points at Step; the earlier Application and its Events are
	// what was there, not news.
	run(30*time.Second,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(css(`tr[data-name="earlier"][data-phase="Running"]`)),
		chromedp.WaitVisible(css(`#hint`)),
		chromedp.WaitVisible(css(`#step.pointed`)),
		chromedp.Poll[chromedp.Void](`document.getElementById("timeline-note").textContent.includes("already in the store")`),
	)
	assert.Contains(t, text("#hint"), "Step")
	assert.Zero(t, count(`#timeline li[data-kind="Event"]`), "the Events of the earlier Application are not replayed as new")
	assert.Zero(t, count(`#timeline li[data-kind="Application"]`))
	shots.Take(t, ctx, "first-visit")

	// Created from the form, the new Application is followed from its first event.
	run(30*time.Second,
		chromedp.Click(css("#hint-ok")),
		chromedp.WaitNotVisible(css("#hint")),
		chromedp.SetValue(css("#new-name"), "web"),
		chromedp.SetValue(css("#new-replicas"), "3"),
		chromedp.Click(css("#create-btn")),
		chromedp.WaitVisible(css(`tr.selected[data-name="web"]`)),
		chromedp.WaitVisible(css(`#story li.s-watch`)),
		chromedp.WaitVisible(css(`#story li.s-pass[data-pass="1"]`)),
	)
	run(10*time.Second, chromedp.Poll[chromedp.Void](`document.querySelector('#story li.s-pass[data-pass="1"]').textContent.includes("queues the key again")`))
	first := text(`#story li.s-pass[data-pass="1"]`)
	for _, want := range []string{"Why: the ADDED watch event just before queued the key", "generation 1: spec asks for 3 × nginx:1.27; no status yet; no finalizer yet",
		"wrote metadata.finalizers rv …", "finalizers [] → [cloudnative.elide.dev/finalizer]", "status rv …", "phase – → Pending",
		"the informer queues the key again", "observedGeneration 1 of 1: it has acted on the latest spec", "requeue in 700ms"} {
		assert.Contains(t, first, want, "reconcile #1 says %q", want)
	}
	assert.Contains(t, text(`#story li.s-watch[data-type="ADDED"]`), "created: spec asks for 3 × nginx:1.27")
	shots.Take(t, ctx, "first-reconcile")

	run(30*time.Second, chromedp.WaitVisible(css(`tr[data-name="web"][data-phase="Running"]`)))
	_, items := request.JSON(t, "GET", apps+"/web/history", "")
	passes := len(items["items"].([]any))
	run(10*time.Second, chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelectorAll("#story li.s-pass").length === %d`, passes)))
	last := text(fmt.Sprintf(`#story li.s-pass[data-pass="%d"]`, passes))
	assert.Contains(t, last, "every replica is ready: phase Running")
	assert.Contains(t, last, "done: nothing more to do")
	assert.Contains(t, last, "Why: the requeue the pass before asked for")
	assert.Contains(t, last, "status-only changes, so they do not queue the key again")
	assert.Zero(t, count(`#story li.s-watch[data-type="MODIFIED"]`), "every change so far was the controller's, told inside its reconcile")
	run(10*time.Second, chromedp.Poll[chromedp.Void](`document.getElementById("story-now").textContent.includes("not in the queue")`))
	assert.Positive(t, count(`#timeline li[data-kind="Event"]`), "the new Events are news")
	shots.Take(t, ctx, "running")
	updateDashboardPNG(t, shots.TakeTop(t, ctx, "running-top", "#story-panel"))

	// A simulated failure: the pass fails, says why, and the retry follows after its backoff.
	run(30*time.Second,
		chromedp.Click(css("#toggle-fail")),
		chromedp.WaitVisible(css(`#story li.s-pass.fail`)),
	)
	failed := text(`#story li.s-pass.fail`)
	assert.Contains(t, failed, "Why: the MODIFIED watch event just before queued the key")
	assert.Contains(t, failed, "failed on purpose, attempt 1 of 3")
	assert.Contains(t, failed, "Ready=False")
	assert.Contains(t, failed, "retry after a backoff: 1 failure in a row so far")
	assert.Contains(t, text(`#story li.s-watch[data-type="MODIFIED"]`), `annotation cloudnative.elide.dev/simulate-failures: – → "3"`)
	shots.Take(t, ctx, "failure")
	run(30*time.Second, chromedp.Poll[chromedp.Void](`[...document.querySelectorAll("#story li.s-pass")].some(li => li.textContent.includes("Why: the retry of the failure just before"))`))
	shots.Take(t, ctx, "retried")
}

// updateDashboardPNG keeps docs/dashboard.png the picture of the current dashboard: it carries
// a fingerprint of server/ui; when that differs (or -update-screenshot), png replaces it, and
// in CI the test fails, since the committed picture shows an older page.
func updateDashboardPNG(t *testing.T, png []byte) {
	t.Helper()
	h := sha256.New()
	dir := filepath.Join(tool.Repo(t), "server", "ui")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		require.NoError(t, err)
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	fp := hex.EncodeToString(h.Sum(nil))
	path := filepath.Join(tool.Repo(t), "docs", "dashboard.png")
	committed, _ := os.ReadFile(path)
	if was, _ := browser.ReadPNGText(committed, "opemu-ui"); was == fp && !*updateScreenshot {
		return
	}
	require.NoError(t, os.WriteFile(path, browser.PNGText(png, "opemu-ui", fp), 0o644))
	if os.Getenv("CI") != "" {
		t.Errorf("docs/dashboard.png showed an older dashboard (server/ui changed since it was taken): it is regenerated from the live page; commit it")
		return
	}
	t.Logf("docs/dashboard.png regenerated from the live page (server/ui changed): commit it")
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
