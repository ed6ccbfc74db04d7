package registry_test

import (
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
)

// TestPodsAreDeletedGracefully: a Pod bound to a node is marked for its grace period and kept
// (a kubelet removes it); a later DELETE may only shorten the period, and one of 0 removes it;
// a Pod bound to no node goes at once, as kube-apiserver's pod strategy has it.
func TestPodsAreDeletedGracefully(t *testing.T) {
	t.Parallel()
	env := registrytest.New(t, registrytest.Options{})
	k, ok := env.Kinds.Lookup("", "v1", "pods")
	require.True(t, ok)
	pod := func(name, node string) registry.Target {
		tg := registry.Target{Kind: k, Key: cache.Key{Resource: "pods", Namespace: "default"}}
		spec := map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx"}}}
		if node != "" {
			spec["nodeName"] = node
		}
		_, err := env.Registry.Create(ctx, tg, map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name}, "spec": spec}, registry.Options{})
		require.NoError(t, err)
		tg.Key.Name = name
		return tg
	}
	md := func(o *cache.Object) map[string]any { return cachetest.Decode(t, o)["metadata"].(map[string]any) }

	bound := pod("bound", "node-a")
	obj, removed, err := env.Registry.Delete(ctx, bound, cache.Preconditions{}, registry.Options{})
	require.NoError(t, err)
	assert.False(t, removed, "kept for its grace period")
	assert.EqualValues(t, "30", md(obj)["deletionGracePeriodSeconds"].(interface{ String() string }).String(), "terminationGracePeriodSeconds's default")
	first := md(obj)["deletionTimestamp"]

	obj, removed, err = env.Registry.Delete(ctx, bound, cache.Preconditions{}, registry.Options{GracePeriodSeconds: ptr.To[int64](60)})
	require.NoError(t, err)
	assert.False(t, removed)
	assert.Equal(t, first, md(obj)["deletionTimestamp"], "a longer grace period changes nothing")

	obj, removed, err = env.Registry.Delete(ctx, bound, cache.Preconditions{}, registry.Options{GracePeriodSeconds: ptr.To[int64](10)})
	require.NoError(t, err)
	assert.False(t, removed)
	assert.Equal(t, "10", md(obj)["deletionGracePeriodSeconds"].(interface{ String() string }).String(), "shortened")
	assert.Less(t, md(obj)["deletionTimestamp"], first, "the deletionTimestamp moves as much earlier")

	obj, removed, err = env.Registry.Delete(ctx, bound, cache.Preconditions{}, registry.Options{GracePeriodSeconds: ptr.To[int64](0)})
	require.NoError(t, err)
	assert.True(t, removed, "a grace period of 0 removes it")
	assert.Equal(t, "0", md(obj)["deletionGracePeriodSeconds"].(interface{ String() string }).String())

	_, removed, err = env.Registry.Delete(ctx, pod("unbound", ""), cache.Preconditions{}, registry.Options{GracePeriodSeconds: ptr.To[int64](30)})
	require.NoError(t, err)
	assert.True(t, removed, "a Pod bound to no node goes at once")
}
