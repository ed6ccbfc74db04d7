package integration

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/browser"
)

// TestDashboardCalls: the calls panel lists a client's calls live (a create by "my-operator"
// appears as it is made), a client filter keeps that client's calls alone, and a reconcile of
// opemu's own controllers, clicked, shows that reconcile's calls (its ReplicaSet's create, and
// the Event the recorder wrote for it).
func TestDashboardCalls(t *testing.T) {
	t.Parallel()
	p := start(t, "ROLLOUT_STEP=0", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	base := "http://" + p.addr
	post := func(agent, path, body string) {
		t.Helper()
		req, err := http.NewRequest("POST", base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("User-Agent", agent)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode, "POST %s", path)
	}

	ctx := browser.Start(t)
	page := browser.NewPage(t, ctx)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	page.Do(30*time.Second,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(css(`#call-note`)),
	)
	post("my-operator/v1.0 (linux/amd64)", "/api/v1/namespaces/default/configmaps", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"seen"}}`)
	page.Do(15*time.Second, chromedp.WaitVisible(css(`#call-list tr[data-client="my-operator"][data-verb="create"][data-resource="configmaps"]`)))
	assert.Contains(t, page.Text(`#call-list tr[data-client="my-operator"]`), "default/seen")

	// One client's calls alone.
	page.Do(15*time.Second,
		chromedp.SetValue(css("#call-client"), "my-operator"),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("call-client").dispatchEvent(new Event("change"))`),
	)
	// The filter re-lists asynchronously: the row seen before it is no sign it has applied.
	require.Eventually(t, func() bool {
		mine := page.Count(`#call-list tr[data-client="my-operator"]`)
		return mine > 0 && page.Count(`#call-list tbody tr`) == mine
	}, 15*time.Second, 50*time.Millisecond, "only my-operator's calls listed")

	// A Deployment's reconcile by opemu's deployment controller: clicked, its calls alone.
	page.Do(15*time.Second, chromedp.Click(css("#call-clear")))
	post("kubectl/v1.37.2", "/apis/apps/v1/namespaces/default/deployments",
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":1,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`)
	row := `#call-list tr[data-client="opemu-workloads"][data-verb="create"][data-resource="replicasets"] td.link`
	page.Do(20*time.Second, chromedp.WaitVisible(css(row)))
	key := page.Text(row)
	require.True(t, strings.HasPrefix(key, "deployment#"), key)
	c, cancel := context.WithTimeout(page.Ctx(), 15*time.Second)
	defer cancel()
	require.NoError(t, chromedp.Do(c, chromedp.Click(css(row))))
	reconcile, err := chromedp.Run(c, chromedp.Evaluate[string](`document.getElementById("call-reconcile").value`))
	require.NoError(t, err)
	assert.Equal(t, key, reconcile)
	require.Eventually(t, func() bool {
		return page.Count(`#call-list tbody tr`) > 0 && page.Count(`#call-list tr[data-client="kubectl"]`) == 0
	}, 10*time.Second, 50*time.Millisecond, "the list is that reconcile's")
	n := page.Count(`#call-list tbody tr`)
	assert.Positive(t, n)
	assert.Equal(t, n, page.Count(`#call-list tr[data-reconcile="`+key+`"]`), "only the calls of that reconcile")
	assert.Positive(t, page.Count(`#call-list tr[data-client="opemu-workloads"][data-verb="create"][data-resource="replicasets"]`))
}
