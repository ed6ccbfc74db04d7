package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/test/internal/browser"
)

// TestDashboardEtcd: over a shared etcd, the dashboard of a follower shows the replica it is
// connected to, who leads and the store; an Application created through its form is rolled
// out by the leader and shown Running there.
func TestDashboardEtcd(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	step := "ROLLOUT_STEP=300ms"
	first := etcdReplica(t, "dash-1", e, "/dash", step)
	leader, _ := waitLeader(t, failoverBound, first)
	follower := etcdReplica(t, "dash-2", e, "/dash", step)
	require.Eventually(t, func() bool { v, ok := follower.view(); return ok && v.Leader == leader.name }, 5*time.Second, 10*time.Millisecond)
	ctx := browser.Start(t)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate("about:blank")))
	run := func(timeout time.Duration, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		c, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		require.NoError(t, chromedp.Do(c, actions...))
	}
	css := func(s string) chromedp.CSS { return chromedp.CSS(s) }
	text := func(id string) string {
		tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		v, err := chromedp.Run(tctx, chromedp.Text(css("#"+id)))
		require.NoError(t, err)
		return strings.TrimSpace(v)
	}
	run(30*time.Second,
		chromedp.Navigate(follower.url("/ui/")),
		chromedp.WaitVisible(css(`#conn[data-state="live"]`)),
		chromedp.Poll[chromedp.Void](`document.getElementById("store").textContent === "etcd"`),
		chromedp.SetValue(css("#new-name"), "shared"),
		chromedp.SetValue(css("#new-replicas"), "2"),
		chromedp.Click(css("#create-btn")),
		chromedp.WaitVisible(css(`tr[data-name="shared"][data-phase="Running"]`)),
	)
	assert.Equal(t, "dash-2", text("replica"))
	assert.Equal(t, "dash-1", text("leader"))
	assert.Equal(t, "etcd", text("store"))
	eventually(t, []string{leader.name}, func() []string { return readyEventSource(t, follower, "shared") }, "rolled out by the leader")
}
