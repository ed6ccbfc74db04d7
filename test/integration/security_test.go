package integration

import (
	"context"
	"encoding/json"
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

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/opemu/opemu/test/internal/browser"
	"github.com/opemu/opemu/test/internal/kubectl"
	"github.com/opemu/opemu/test/internal/request"
)

// SPEC §13 through real clients: a real browser as the attacker and as the user, kubectl,
// client-go and curl-like requests, against opemu configured as the binary is from its
// environment (TOKEN_FILE). TLS=self-signed, with its restart, is tested on the binary
// (test/e2e).

const appsAPI = "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"

// listState is the list of Applications as names and resourceVersions: two equal states mean
// nothing was written in between.
func listState(t *testing.T, base string, client *http.Client, header http.Header) string {
	t.Helper()
	req, err := http.NewRequest("GET", base+appsAPI, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var list struct {
		Items []struct {
			Metadata struct{ Name, ResourceVersion string }
		}
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&list))
	var b strings.Builder
	for _, it := range list.Items {
		fmt.Fprintf(&b, "%s@%s ", it.Metadata.Name, it.Metadata.ResourceVersion)
	}
	return b.String()
}

// refusals sums apiserver_request_total over code 403: requests that reached opemu and were
// refused (by the guard, since the attack page sends nothing admission would deny).
func refusals(t *testing.T, base string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var sum float64
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `code="403"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
			require.NoError(t, err)
			sum += v
		}
	}
	return sum
}

// attackPage is a page on another origin that tries every write a browser sends without a
// CORS preflight (and a few it must preflight) against the opemu API at {{API}}. It logs each
// attempt in #out and adds #done at the end.
const attackPage = `<!doctype html>
<html><head><title>attack</title></head><body>
<iframe name="f1"></iframe><iframe name="f2"></iframe><iframe name="f3"></iframe>
<form id="urlencoded" method="POST" action="{{API}}" target="f1"><input name="metadata" value='{"name":"form-urlencoded"}'></form>
<form id="plain" method="POST" action="{{API}}" target="f2" enctype="text/plain"><input
  name='{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"form-plain"},"spec":{"replicas":1,"image":"nginx:1.27"},"pad":"'
  value='"}'></form>
<form id="multipart" method="POST" action="{{API}}" target="f3" enctype="multipart/form-data"><input name="x" value="{}"></form>
<pre id="out"></pre>
<script>
const API = "{{API}}";
const obj = (name) => JSON.stringify({ apiVersion: "cloudnative.elide.dev/v1", kind: "Application", metadata: { name }, spec: { replicas: 1, image: "nginx:1.27" } });
const log = [];
const settle = (p) => Promise.race([p, new Promise((r) => setTimeout(r, 3000))]);
async function step(label, fn) {
  try { await settle(fn()); log.push(label + ": sent"); } catch (e) { log.push(label + ": " + e); }
}
async function attack() {
  for (const [id, frame] of [["urlencoded", "f1"], ["plain", "f2"], ["multipart", "f3"]]) {
    const loaded = new Promise((r) => document.querySelector("iframe[name=" + frame + "]").addEventListener("load", r, { once: true }));
    document.getElementById(id).submit();
    await settle(loaded);
    log.push("form " + id + ": submitted");
  }
  await step("no-cors text/plain", () => fetch(API, { method: "POST", mode: "no-cors", headers: { "Content-Type": "text/plain" }, body: obj("nocors-plain") }));
  await step("no-cors typeless Blob", () => fetch(API, { method: "POST", mode: "no-cors", body: new Blob([obj("nocors-blob")]) }));
  await step("no-cors typeless Blob with credentials", () => fetch(API, { method: "POST", mode: "no-cors", credentials: "include", body: new Blob([obj("nocors-cred")]) }));
  await step("cors typeless Blob", () => fetch(API, { method: "POST", body: new Blob([obj("cors-blob")]) }));
  await step("cors text/plain", () => fetch(API, { method: "POST", headers: { "Content-Type": "text/plain" }, body: obj("cors-plain") }));
  await step("xhr text/plain", () => new Promise((r) => { const x = new XMLHttpRequest(); x.open("POST", API); x.onloadend = r; x.send(obj("xhr-plain")); }));
  log.push("sendBeacon typeless Blob: " + navigator.sendBeacon(API, new Blob([obj("beacon")])));
  await step("no-cors reconcile", () => fetch(API + "/victim/reconcile", { method: "POST", mode: "no-cors" }));
  await step("cors JSON (preflighted)", () => fetch(API, { method: "POST", headers: { "Content-Type": "application/json" }, body: obj("cors-json") }));
  await step("cors DELETE (preflighted)", () => fetch(API + "/victim", { method: "DELETE" }));
  await step("cors PATCH (preflighted)", () => fetch(API + "/victim", { method: "PATCH", headers: { "Content-Type": "application/merge-patch+json" }, body: "{}" }));
  document.getElementById("out").textContent = log.join("\n");
  const done = document.createElement("p");
  done.id = "done";
  done.textContent = "done";
  document.body.appendChild(done);
}
attack();
</script></body></html>`

// attackRequests is how many of the page's requests reach opemu (the rest the browser stops):
// three forms, six fetches and XHRs, the beacon, the reconcile, and three preflights.
const attackRequests = 14

// TestBrowserCannotDriveOpemu: a page from another origin on another port, in headless
// Chromium, tries every write a browser sends without a preflight; nothing is stored. A
// DNS-rebinding name is refused. (TestDashboard shows the dashboard itself still works.)
func TestBrowserCannotDriveOpemu(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false")
	base := "http://" + p.addr
	code, _ := request.JSON(t, "POST", base+appsAPI, `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"victim"},"spec":{"replicas":1,"image":"nginx:1.27"}}`)
	require.Equal(t, http.StatusCreated, code)

	page := strings.ReplaceAll(attackPage, "{{API}}", base+appsAPI)
	attacker := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = io.WriteString(w, page)
	}))
	defer attacker.Close()
	_, attackerPort, _ := strings.Cut(attacker.Listener.Addr().String(), ":")

	// attacker.example resolves to this machine, as a DNS-rebinding attacker would make it.
	ctx := browser.Start(t, chromedp.Flag("host-resolver-rules", "MAP attacker.example 127.0.0.1"))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))

	before := listState(t, base, http.DefaultClient, nil)
	refused := refusals(t, base)
	for _, origin := range []string{
		"http://localhost:" + attackerPort, // another site (localhost is not 127.0.0.1's site)
		"http://127.0.0.1:" + attackerPort, // the same site on another port: another origin still
	} {
		t.Run(origin, func(t *testing.T) {
			c, cancel := context.WithTimeout(ctx, 60*time.Second)
			defer cancel()
			require.NoError(t, chromedp.Do(c, chromedp.Navigate(origin+"/"), chromedp.WaitVisible(chromedp.CSS("#done"))))
			out, err := chromedp.Run(c, chromedp.Text(chromedp.CSS("#out")))
			require.NoError(t, err)
			t.Logf("the page's attempts:\n%s", out)
			// Every request that reached opemu was refused (a 403 from the guard); the beacon
			// is sent in the background, hence the wait.
			want := refused + attackRequests
			require.Eventually(t, func() bool { return refusals(t, base) >= want }, 10*time.Second, 50*time.Millisecond,
				"opemu refused %v of the page's %d requests", refusals(t, base)-refused, attackRequests)
			refused = refusals(t, base)
			assert.Equal(t, before, listState(t, base, http.DefaultClient, nil), "nothing stored, changed or deleted")
		})
	}

	// DNS rebinding: the browser reaches opemu under the attacker's name, and is refused.
	_, port, _ := strings.Cut(p.addr, ":")
	for _, path := range []string{appsAPI, "/ui/"} {
		c, cancel := context.WithTimeout(ctx, 30*time.Second)
		require.NoError(t, chromedp.Do(c, chromedp.Navigate("http://attacker.example:"+port+path)))
		body, err := chromedp.Run(c, chromedp.Text(chromedp.CSS("body")))
		cancel()
		require.NoError(t, err)
		assert.Contains(t, body, `"code":403`, path)
		assert.Contains(t, body, "ALLOWED_HOSTS=attacker.example", path)
		assert.NotContains(t, body, "victim", path)
	}
	req, err := http.NewRequest("GET", base+appsAPI, nil)
	require.NoError(t, err)
	req.Host = "attacker.example"
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusForbidden, resp.StatusCode)
	assert.Equal(t, before, listState(t, base, http.DefaultClient, nil))
}

// writeTokenFile writes a kube-apiserver static token file for alice and bob.
func writeTokenFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens.csv")
	require.NoError(t, os.WriteFile(path, []byte("alice-3f9c2a,alice,1001,\"developers,ops\"\nbob-77d1e0,bob,1002\n"), 0o600))
	return path
}

// TestTokens: with TOKEN_FILE, requests without a token get 401 Status; client-go and the
// dashboard (after its prompt) work, each as its user; the health probes need nothing. kubectl
// and client-go's kubeconfig loader send a token only over HTTPS (TestSelfSignedTLS): over
// plain HTTP kubectl says it must log in, and `opemu kubeconfig` says why.
func TestTokens(t *testing.T) {
	t.Parallel()
	tokens := writeTokenFile(t)
	p := start(t, "TOKEN_FILE="+tokens, "ROLLOUT_STEP=100ms", "ENABLE_LEADER_ELECTION=false")
	base := "http://" + p.addr

	// curl without a token.
	for _, path := range []string{"/api", appsAPI, "/watch", "/ui/app.js", "/metrics", "/"} {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		var st metav1.Status
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&st), path)
		resp.Body.Close()
		assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, path)
		assert.Equal(t, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: "Failure",
			Message: "Unauthorized", Reason: metav1.StatusReasonUnauthorized, Code: 401}, st, path)
	}
	code, _ := request.JSON(t, "POST", base+appsAPI, request.AppJSON)
	assert.Equal(t, http.StatusUnauthorized, code)
	for _, path := range []string{"/healthz", "/readyz", "/livez"} {
		resp, err := http.Get(base + path)
		require.NoError(t, err)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, path)
	}

	// curl with alice's token.
	req, err := http.NewRequest("POST", base+appsAPI, strings.NewReader(strings.Replace(request.AppJSON, `"web"`, `"demo"`, 1)))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer alice-3f9c2a")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	// client-go, as bob.
	rc := p.restConfig()
	rc.BearerToken = "bob-77d1e0"
	dyn, err := dynamic.NewForConfig(rc)
	require.NoError(t, err)
	_, err = dyn.Resource(appsGVR).Namespace("default").Create(context.Background(), appObject("from-client-go", 1), metav1.CreateOptions{})
	require.NoError(t, err)
	list, err := dyn.Resource(appsGVR).Namespace("default").List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.Items, 2)
	w, err := dyn.Resource(appsGVR).Namespace("default").Watch(context.Background(), metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	require.NoError(t, err)
	w.Stop()

	// kubectl over plain HTTP leaves the token out, as it does with every API server.
	kc, warning := kubeconfig(t, []string{"TOKEN_FILE=" + tokens}, "--server", base)
	assert.Contains(t, string(kc), `token: "alice-3f9c2a"`)
	assert.Contains(t, warning, "TLS=self-signed")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := kubectl.New(t, kc).Cmd(ctx, "get", "apps").CombinedOutput()
	require.Error(t, err)
	assert.Contains(t, string(out), "error: You must be logged in to the server (")

	// The dashboard asks for the token once, then works: its stream, its writes.
	ctx2 := browser.Start(t)
	require.NoError(t, chromedp.Do(ctx2, chromedp.Navigate("about:blank")))
	c, cancel2 := context.WithTimeout(ctx2, 60*time.Second)
	defer cancel2()
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	require.NoError(t, chromedp.Do(c,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(css("#token")),
		chromedp.SetValue(css("#token"), "wrong"),
		chromedp.Click(css("#login-btn")),
		chromedp.WaitVisible(css("#failed")),
		chromedp.SetValue(css("#token"), "bob-77d1e0"),
		chromedp.Click(css("#login-btn")),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(css(`tr[data-name="demo"]`)),
		chromedp.SetValue(css("#new-name"), "from-dashboard"),
		chromedp.SetValue(css("#new-replicas"), "2"),
		chromedp.Click(css("#create-btn")),
		chromedp.WaitVisible(css(`tr[data-name="from-dashboard"][data-phase="Running"]`)),
	))
	leader, err := chromedp.Run(c, chromedp.Text(css("#leader")))
	require.NoError(t, err)
	assert.NotEqual(t, "unreachable", leader, "the page's fetches carry the cookie")
	// A new page of the same browser needs no prompt: the cookie is kept.
	require.NoError(t, chromedp.Do(c, chromedp.Navigate(base+"/ui/"), chromedp.WaitVisible(css(`#conn[data-state="live"]`))))
	loc, err := chromedp.Run(c, chromedp.Location())
	require.NoError(t, err)
	assert.Equal(t, base+"/ui/", loc)

	// Each write's Event names who made it.
	assert.Equal(t, map[string]string{"demo": "alice", "from-client-go": "bob", "from-dashboard": "bob"},
		request.EventSources(t, base, http.DefaultClient, "alice-3f9c2a"))
}
