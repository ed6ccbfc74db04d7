package integration

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKubectlPodsOnNodes is issue 29's acceptance, as a new user types it: a Deployment's
// ReplicaSet runs three Pods on the Node, Running and Ready; a new image rolls out a second
// ReplicaSet; rollout history and undo work; drain evicts the Pods, but not while a
// PodDisruptionBudget forbids it.
func TestKubectlPodsOnNodes(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=100ms")
	k := p.kubectl(t)

	assert.Contains(t, k.Run("create", "deployment", "web", "--image=nginx", "--replicas=3"), "deployment.apps/web created")
	assert.Contains(t, k.Run("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	wide := k.Run("get", "rs,pods", "-o", "wide")
	assert.Regexp(t, `replicaset.apps/web-5fc9f4bf66\s+3\s+3\s+3\s`, wide, "kube's pod-template-hash for this template")
	running := regexp.MustCompile(`web-5fc9f4bf66-[a-z0-9]{5}\s+1/1\s+Running\s+0\s+\S+\s+10\.244\.0\.\d+\s+opemu-control-plane\s`)
	assert.Len(t, running.FindAllString(wide, -1), 3, "three Pods Running and Ready on the Node:\n%s", wide)

	assert.Contains(t, k.Run("set", "image", "deployment/web", "nginx=nginx:1.28"), "image updated")
	assert.Contains(t, k.Run("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	rs := k.Run("get", "rs")
	assert.Regexp(t, `web-5fc9f4bf66\s+0\s+0\s+0\s`, rs, "the first ReplicaSet is scaled to 0 and kept")
	assert.Regexp(t, `web-[a-z0-9]+\s+3\s+3\s+3\s`, rs)
	assert.Regexp(t, `REVISION\s+CHANGE-CAUSE\n1\s+<none>\n2\s+<none>`, k.Run("rollout", "history", "deployment/web"))
	assert.Contains(t, k.Run("rollout", "history", "deployment/web", "--revision=2"), "nginx:1.28")

	assert.Contains(t, k.Run("rollout", "undo", "deployment/web"), "rolled back")
	assert.Contains(t, k.Run("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	assert.Regexp(t, `REVISION\s+CHANGE-CAUSE\n2\s+<none>\n3\s+<none>`, k.Run("rollout", "history", "deployment/web"), "the first revision is the third now")
	assert.Regexp(t, `web-5fc9f4bf66\s+3\s+3\s+3\s`, k.Run("get", "rs"))

	// A budget that needs all three: drain cordons the Node and is refused every eviction.
	assert.Contains(t, k.Run("create", "pdb", "web", "--selector=app=web", "--min-available=3"), "poddisruptionbudget.policy/web created")
	require.Eventually(t, func() bool {
		return k.Run("get", "pdb", "web", "-o", "jsonpath={.status.observedGeneration} {.status.currentHealthy} {.status.disruptionsAllowed}") == "1 3 0"
	}, 30*time.Second, 50*time.Millisecond, "the disruption controller counts the budget's Pods")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := k.Cmd(ctx, "drain", "opemu-control-plane", "--timeout=3s").CombinedOutput()
	require.Error(t, err, "drain must fail while the budget forbids it:\n%s", out)
	assert.Contains(t, string(out), "Cannot evict pod as it would violate the pod's disruption budget.")
	assert.Regexp(t, `opemu-control-plane\s+Ready,SchedulingDisabled`, k.Run("get", "nodes"))
	assert.Len(t, running.FindAllString(k.Run("get", "pods", "-o", "wide"), -1), 3, "nothing evicted")

	// Without the budget, drain evicts them; their replacements have no Node to go to.
	k.Run("delete", "pdb", "web")
	drained := k.Run("drain", "opemu-control-plane", "--timeout=30s")
	assert.Equal(t, 3, strings.Count(drained, "evicted"), drained)
	assert.Contains(t, drained, "node/opemu-control-plane drained")
	require.Eventually(t, func() bool {
		pending := k.Run("get", "pods", "--field-selector=status.phase=Pending", "-o", "name")
		return len(strings.Fields(pending)) == 3
	}, 30*time.Second, 50*time.Millisecond, "the ReplicaSet replaced the evicted Pods")
	assert.Contains(t, k.Run("get", "pods", "-o", "jsonpath={.items[0].status.conditions[0].message}"),
		"0/1 nodes are available: 1 node(s) were unschedulable.")

	// Uncordoned, the Node takes them at once.
	assert.Contains(t, k.Run("uncordon", "opemu-control-plane"), "uncordoned")
	assert.Contains(t, k.Run("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	assert.Len(t, running.FindAllString(k.Run("get", "pods", "-o", "wide"), -1), 3)
}
