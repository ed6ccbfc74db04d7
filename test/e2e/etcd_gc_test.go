package e2e

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/test/internal/request"
)

// TestEtcdLeaderCollectsAndRollsOut: with replicas sharing one etcd, what is written through a
// follower is collected and rolled out by the leader alone: the Warning of an invalid owner
// reference and the Events of a Deployment's rollout and a Job's completion name the leader
// as their source, and a foreground delete through a follower returns with the dependents gone.
func TestEtcdLeaderCollectsAndRollsOut(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	env := []string{"ROLLOUT_STEP=100ms", "JOB_DURATION=100ms"}
	rs := []*replica{etcdReplica(t, "gc-1", e, "/gc", env...), etcdReplica(t, "gc-2", e, "/gc", env...)}
	leader, _ := waitLeader(t, haLease+time.Duration(4.4*float64(haRetry)), rs...)
	require.Eventually(t, func() bool {
		for _, r := range rs {
			if v, ok := r.view(); !ok || v.Leader != leader.name {
				return false
			}
		}
		return true
	}, 5*time.Second, 10*time.Millisecond, "every replica agrees who leads")
	follower := without(rs, leader)[0]

	cms := "/api/v1/namespaces/default/configmaps"
	create := func(path, body string) string {
		t.Helper()
		code, obj := request.JSON(t, "POST", follower.url(path), body)
		require.Equal(t, http.StatusCreated, code, "%v", obj)
		return obj["metadata"].(map[string]any)["uid"].(string)
	}
	owned := func(name, ownerName, uid string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":%q,"uid":%q,"blockOwnerDeletion":true}]}}`, name, ownerName, uid)
	}
	create("/api/v1/namespaces", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"other"}}`)
	owner := create(cms, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"owner"}}`)
	create(cms, owned("dep-1", "owner", owner))
	create(cms, owned("dep-2", "owner", owner))
	create("/api/v1/namespaces/other/configmaps", owned("cross", "owner", owner))

	code, obj := request.JSON(t, "DELETE", follower.url(cms+"/owner"), `{"propagationPolicy":"Foreground"}`)
	require.Equal(t, http.StatusOK, code, "%v", obj)
	assert.Equal(t, []any{"foregroundDeletion"}, obj["metadata"].(map[string]any)["finalizers"])
	require.Eventually(t, func() bool {
		code, _ := request.JSON(t, "GET", follower.url(cms+"/owner"), "")
		return code == http.StatusNotFound
	}, 10*time.Second, 20*time.Millisecond, "the owner goes after its dependents")
	for _, name := range []string{"dep-1", "dep-2"} {
		code, _ := request.JSON(t, "GET", follower.url(cms+"/"+name), "")
		assert.Equal(t, http.StatusNotFound, code, name)
	}
	sources := func(ns, reason string) func() []string {
		return func() []string {
			code, obj := request.JSON(t, "GET", follower.url("/api/v1/namespaces/"+ns+"/events?fieldSelector=reason="+reason), "")
			require.Equal(t, http.StatusOK, code)
			hosts := []string{}
			for _, it := range obj["items"].([]any) {
				src, _ := it.(map[string]any)["source"].(map[string]any)
				h, _ := src["host"].(string)
				hosts = append(hosts, h)
			}
			return hosts
		}
	}
	eventually(t, []string{leader.name}, sources("other", "OwnerRefInvalidNamespace"), "the leader's collector reported the invalid reference")

	create("/apis/apps/v1/namespaces/default/deployments", `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,
"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27"}]}}}}`)
	create("/apis/batch/v1/namespaces/default/jobs", `{"apiVersion":"batch/v1","kind":"Job","metadata":{"name":"once"},"spec":{
"template":{"spec":{"restartPolicy":"Never","containers":[{"name":"once","image":"busybox:1.36"}]}}}}`)
	require.Eventually(t, func() bool {
		_, d := request.JSON(t, "GET", follower.url("/apis/apps/v1/namespaces/default/deployments/web"), "")
		st, _ := d["status"].(map[string]any)
		return st["availableReplicas"] == float64(2)
	}, 10*time.Second, 20*time.Millisecond, "the Deployment rolls out")
	require.Eventually(t, func() bool {
		_, j := request.JSON(t, "GET", follower.url("/apis/batch/v1/namespaces/default/jobs/once"), "")
		st, _ := j["status"].(map[string]any)
		return st["succeeded"] == float64(1)
	}, 10*time.Second, 20*time.Millisecond, "the Job completes")
	eventually(t, []string{leader.name}, sources("default", "ScalingReplicaSet"), "the leader rolled the Deployment out")
	eventually(t, []string{leader.name}, sources("default", "Completed"), "the leader ran the Job")
}
