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

// TestDashboardUser switches the dashboard's user with RBAC on: as a ServiceAccount a Role lets
// read Applications only, the page lists what it may do and its create is refused with kube's
// 403; as the dashboard's own user (the admin) the same create succeeds.
func TestDashboardUser(t *testing.T) {
	t.Parallel()
	p := start(t, "AUTHORIZATION_MODE=RBAC", "TOKEN=admin-7c1d", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	base := "http://" + p.addr
	admin := func(method, path, body string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Authorization", "Bearer admin-7c1d")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusCreated, resp.StatusCode, "%s %s", method, path)
	}
	admin("POST", "/api/v1/namespaces/default/serviceaccounts", `{"apiVersion":"v1","kind":"ServiceAccount","metadata":{"name":"operator"}}`)
	admin("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/roles",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"Role","metadata":{"name":"reader"},"rules":[{"apiGroups":["cloudnative.elide.dev"],"resources":["applications"],"verbs":["get","list","watch"]}]}`)
	admin("POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/default/rolebindings",
		`{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"RoleBinding","metadata":{"name":"reader"},"roleRef":{"apiGroup":"rbac.authorization.k8s.io","kind":"Role","name":"reader"},"subjects":[{"kind":"ServiceAccount","name":"operator","namespace":"default"}]}`)

	ctx := browser.Start(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	c, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	const sa = "system:serviceaccount:default:operator"
	require.NoError(t, chromedp.Do(c,
		chromedp.Navigate(base+"/ui/?token=admin-7c1d"),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.WaitReady(css(`#user option[value="`+sa+`"]`)),
		chromedp.SetValue(css("#user"), sa),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("user").dispatchEvent(new Event("change"))`),
		chromedp.WaitVisible(css(`#user-rules[data-user="`+sa+`"]`)),
	))
	rules, err := chromedp.Run(c, chromedp.Text(css("#user-rules")))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(rules, "As "+sa+" in default: may "), rules)
	assert.Contains(t, rules, "get,list,watch applications")
	assert.NotContains(t, rules, "create")

	require.NoError(t, chromedp.Do(c,
		chromedp.SetValue(css("#new-name"), "as-operator"),
		chromedp.Click(css("#create-btn")),
		chromedp.Poll[chromedp.Void](`document.getElementById("message").textContent.startsWith("403")`),
	))
	msg, err := chromedp.Run(c, chromedp.Text(css("#message")))
	require.NoError(t, err)
	assert.Equal(t, `403 Forbidden: applications.cloudnative.elide.dev is forbidden: User "`+sa+
		`" cannot create resource "applications" in API group "cloudnative.elide.dev" in the namespace "default"`, msg)

	// Back to the dashboard's own user: the same create succeeds.
	require.NoError(t, chromedp.Do(c,
		chromedp.SetValue(css("#user"), ""),
		chromedp.Evaluate[chromedp.Void](`document.getElementById("user").dispatchEvent(new Event("change"))`),
		chromedp.WaitNotVisible(css("#user-rules")),
		chromedp.Click(css("#create-btn")),
		chromedp.WaitVisible(css(`tr[data-name="as-operator"]`)),
	))
}
