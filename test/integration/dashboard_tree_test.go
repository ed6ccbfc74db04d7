package integration

import (
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/browser"
	"github.com/opemu/opemu/test/internal/request"
)

// TestDashboardTree: the workloads panel draws Deployment → ReplicaSets → Pods → Nodes from the
// watch. A Deployment created through the API appears with its ReplicaSet (the one the store
// has) and its three Pods bound to the Node, Running and Ready; a new image rolls out a second
// ReplicaSet, seen while both hold Pods (the rollout moving Pod by Pod, a ROLLOUT_STEP apart),
// until the new one has every Pod and the old one none.
func TestDashboardTree(t *testing.T) {
	t.Parallel()
	p := start(t, "ROLLOUT_STEP=1s", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	base := "http://" + p.addr
	deployments := base + "/apis/apps/v1/namespaces/default/deployments"

	ctx := browser.Start(t)
	page := browser.NewPage(t, ctx)
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	shots := browser.NewShots(t) // for a person to judge: $OPEMU_DASHBOARD_SHOTS
	page.Do(30*time.Second,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.WaitVisible(css(`#tree-empty`)),
	)

	code, _ := request.JSON(t, "POST", deployments, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3,
		"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"nginx","image":"nginx:1.27"}]}}}}`)
	require.Equal(t, http.StatusCreated, code)
	web := `#tree-list li[data-kind="Deployment"][data-name="web"][data-namespace="default"]`
	first := web + ` li[data-kind="ReplicaSet"][data-revision="1"]`
	running := ` li[data-kind="Pod"][data-node="opemu-control-plane"][data-phase="Running"][data-ready="true"]`
	page.Do(30*time.Second,
		chromedp.WaitVisible(css(first)),
		chromedp.Poll[chromedp.Void](`document.querySelectorAll(`+strconv.Quote(first+running)+`).length === 3`),
	)
	assert.False(t, page.Count(`#tree-empty:not([hidden])`) > 0, "the hint goes once there is a Deployment")
	sets := request.Get(t, base+"/apis/apps/v1/namespaces/default/replicasets")["items"].([]any)
	require.Len(t, sets, 1)
	rs1 := sets[0].(map[string]any)["metadata"].(map[string]any)["name"].(string)
	assert.Equal(t, 1, page.Count(first+`[data-name="`+rs1+`"]`), "the ReplicaSet the store has, %s", rs1)
	assert.Contains(t, page.Text(first), "→ Node opemu-control-plane")

	// kubectl set image: the second ReplicaSet, listed first (newest revision), takes the Pods
	// over one at a time.
	code, body, _ := request.Timed(t, "PATCH", deployments+"/web", "application/strategic-merge-patch+json",
		`{"spec":{"template":{"spec":{"containers":[{"name":"nginx","image":"nginx:1.28"}]}}}}`)
	require.Equal(t, http.StatusOK, code, string(body))
	second := web + ` li[data-kind="ReplicaSet"][data-revision="2"]`
	page.Do(30*time.Second,
		chromedp.WaitVisible(css(second)),
		chromedp.Poll[chromedp.Void](`(() => {
			const sets = [...document.querySelectorAll(`+strconv.Quote(web+` li[data-kind="ReplicaSet"]`)+`)];
			return sets.length === 2 && sets.every((li) => Number(li.dataset.pods) > 0);
		})()`),
	)
	shots.Take(t, page.Ctx(), "rollout")
	mid := page.Text(web)
	assert.Contains(t, mid, "nginx:1.27")
	assert.Contains(t, mid, "nginx:1.28")
	page.Do(60*time.Second,
		chromedp.Poll[chromedp.Void](`document.querySelectorAll(`+strconv.Quote(second+running)+`).length === 3 &&
			document.querySelector(`+strconv.Quote(first)+`).dataset.pods === "0"`),
	)
	assert.Equal(t, 1, page.Count(web+`[data-replicasets="2"]`))
	assert.Equal(t, 1, page.Count(web+` > ul > li[data-kind="ReplicaSet"]:first-child[data-revision="2"]`), "the newest revision first")
	assert.Contains(t, page.Text(second), "3/3 ready")
	shots.Take(t, page.Ctx(), "rolled-out")
}
