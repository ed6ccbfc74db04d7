package disruption_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/disruption"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBudgetStatus: a budget's status is counted from the Pods it selects, as kube's
// disruption controller counts it: an integer minAvailable against the Pods selected, a
// maxUnavailable against their controller's replicas; a Pod not Ready is not healthy.
func TestBudgetStatus(t *testing.T) {
	ctx := context.Background()
	env := registrytest.New(t, registrytest.Options{})
	c := env.Registry.Client("test")
	rs, err := c.Create(ctx, cache.Key{Group: "apps", Resource: "replicasets", Namespace: "default"}, map[string]any{
		"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": map[string]any{"name": "web"},
		"spec": map[string]any{"replicas": 4, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}}}})
	require.NoError(t, err)
	for i, ready := range []string{"True", "True", "True", "False"} {
		key := cache.Key{Resource: "pods", Namespace: "default", Name: fmt.Sprint("web-", i)}
		p, err := c.Create(ctx, cache.Key{Resource: "pods", Namespace: "default"}, map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": key.Name, "labels": map[string]any{"app": "web"},
				"ownerReferences": []any{map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": rs.UID(), "controller": true}}},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}})
		require.NoError(t, err)
		m := cachetest.Decode(t, p)
		m["status"] = map[string]any{"phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": ready}}}
		_, err = c.UpdateStatus(ctx, key, m)
		require.NoError(t, err)
	}
	ctrl, err := disruption.New(disruption.Config{Client: c})
	require.NoError(t, err)
	for _, tc := range []struct {
		name string
		spec map[string]any
		want string
	}{
		{"min-available", map[string]any{"minAvailable": 2}, "expected 4 desired 2 healthy 3 allowed 1 DisruptionAllowed=True"},
		{"max-unavailable", map[string]any{"maxUnavailable": "50%"}, "expected 4 desired 2 healthy 3 allowed 1 DisruptionAllowed=True"},
		{"all", map[string]any{"minAvailable": "100%"}, "expected 4 desired 4 healthy 3 allowed 0 DisruptionAllowed=False"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec["selector"] = map[string]any{"matchLabels": map[string]any{"app": "web"}}
			key := cache.Key{Group: "policy", Resource: "poddisruptionbudgets", Namespace: "default", Name: tc.name}
			_, err := c.Create(ctx, cache.Key{Group: key.Group, Resource: key.Resource, Namespace: "default"}, map[string]any{
				"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": map[string]any{"name": tc.name}, "spec": tc.spec})
			require.NoError(t, err)
			_, err = ctrl.Reconcile(ctx, key)
			require.NoError(t, err)
			o, err := c.Get(ctx, key)
			require.NoError(t, err)
			st := cachetest.Decode(t, o)["status"].(map[string]any)
			cond := st["conditions"].([]any)[0].(map[string]any)
			assert.Equal(t, tc.want, fmt.Sprintf("expected %v desired %v healthy %v allowed %v %v=%v",
				st["expectedPods"], st["desiredHealthy"], st["currentHealthy"], st["disruptionsAllowed"], cond["type"], cond["status"]))
			assert.EqualValues(t, "1", fmt.Sprint(st["observedGeneration"]))
		})
	}
}
