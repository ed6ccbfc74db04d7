package registry_test

import (
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// TestBindAndEvict: a binding assigns a Pod once (a second is kube's 409); an eviction of a
// running Pod waits for its budget to be processed, is refused while the budget allows no
// disruption (429 in kube's words), and when it allows one takes it and deletes the Pod with
// the DisruptionTarget condition.
func TestBindAndEvict(t *testing.T) {
	t.Parallel()
	env := registrytest.New(t, registrytest.Options{})
	c := env.Registry.Client("test")
	pod := cache.Key{Resource: "pods", Namespace: "default", Name: "p"}
	_, err := c.Create(ctx, cache.Key{Resource: "pods", Namespace: "default"}, map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}})
	require.NoError(t, err)

	bound, err := c.Bind(ctx, pod, registry.Binding{Node: "node-a"})
	require.NoError(t, err)
	got := cachetest.Decode(t, bound)
	assert.Equal(t, "node-a", got["spec"].(map[string]any)["nodeName"])
	assert.Equal(t, "PodScheduled", got["status"].(map[string]any)["conditions"].([]any)[0].(map[string]any)["type"])
	_, err = c.Bind(ctx, pod, registry.Binding{Node: "node-b"})
	require.True(t, apierrors.IsConflict(err))
	assert.Equal(t, `Operation cannot be fulfilled on pods/binding "p": pod p is already assigned to node "node-a"`, err.Error())

	// Running and Ready: a budget decides.
	st := cachetest.Decode(t, bound)
	st["status"] = map[string]any{"phase": "Running", "conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}
	_, err = c.UpdateStatus(ctx, pod, st)
	require.NoError(t, err)
	pdbKey := cache.Key{Group: "policy", Resource: "poddisruptionbudgets", Namespace: "default", Name: "pdb"}
	_, err = c.Create(ctx, cache.Key{Group: "policy", Resource: "poddisruptionbudgets", Namespace: "default"}, map[string]any{
		"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": map[string]any{"name": "pdb"},
		"spec": map[string]any{"minAvailable": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}})
	require.NoError(t, err)
	evict := func() error { return env.Registry.Evict(ctx, pod, cache.Preconditions{}, registry.Options{}) }
	err = evict()
	require.True(t, apierrors.IsTooManyRequests(err), "%v", err)
	assert.Equal(t, "The disruption budget pdb is still being processed by the server.", err.(apierrors.APIStatus).Status().Details.Causes[0].Message)

	setBudget := func(allowed int) {
		o, err := c.Get(ctx, pdbKey)
		require.NoError(t, err)
		m := cachetest.Decode(t, o)
		m["status"] = map[string]any{"observedGeneration": 1, "disruptionsAllowed": allowed, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}
		_, err = c.UpdateStatus(ctx, pdbKey, m)
		require.NoError(t, err)
	}
	setBudget(0)
	err = evict()
	require.True(t, apierrors.IsTooManyRequests(err))
	s := err.(apierrors.APIStatus).Status()
	assert.Equal(t, "Cannot evict pod as it would violate the pod's disruption budget.", s.Message)
	assert.Equal(t, "The disruption budget pdb needs 1 healthy pods and has 1 currently", s.Details.Causes[0].Message)

	setBudget(1)
	require.NoError(t, evict())
	o, err := c.Get(ctx, pod)
	require.NoError(t, err)
	assert.True(t, o.Deleting(), "deleted gracefully: bound to a node")
	conds := cachetest.Decode(t, o)["status"].(map[string]any)["conditions"].([]any)
	assert.Equal(t, "EvictionByEvictionAPI", conds[len(conds)-1].(map[string]any)["reason"])
	b, err := c.Get(ctx, pdbKey)
	require.NoError(t, err)
	bst := cachetest.Decode(t, b)["status"].(map[string]any)
	assert.EqualValues(t, "0", bst["disruptionsAllowed"].(interface{ String() string }).String(), "the disruption is taken")
	assert.Contains(t, bst["disruptedPods"], "p")
	assert.NoError(t, evict(), "a Pod being deleted is evicted again without its budget")
}
