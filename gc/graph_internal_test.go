package gc

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// nodes is how many uids the running collector's graph holds.
func (c *Collector) nodes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.graph == nil {
		return -1
	}
	return len(c.graph.nodes)
}

// TestGraphHoldsOnlyOwnership: the graph holds the objects that take part in ownership and
// nothing else (memory follows the owned objects, not the store), and forgets them once they
// are collected.
func TestGraphHoldsOnlyOwnership(t *testing.T) {
	t.Parallel()
	env := registrytest.New(t, registrytest.Options{})
	client := env.Registry.Client("test")
	c, err := New(Config{Client: env.Registry.Client("garbage-collector"), Kinds: env.Kinds})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = c.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	cm := func(name string, owners ...any) *cache.Object {
		md := map[string]any{"name": name}
		if len(owners) > 0 {
			md["ownerReferences"] = owners
		}
		o, err := client.Create(ctx, cache.Key{Resource: "configmaps", Namespace: "default", Name: name}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md})
		require.NoError(t, err)
		return o
	}
	for i := range 200 {
		cm(fmt.Sprint("unrelated-", i))
	}
	owner := cm("owner")
	for i := range 10 {
		cm(fmt.Sprint("dep-", i), map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.UID()})
	}
	require.Eventually(t, func() bool { return c.nodes() == 11 }, 10*time.Second, 5*time.Millisecond, "the owner and its 10 dependents, not the 200 others")

	_, _, err = client.Delete(ctx, owner.Key(), cache.Preconditions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return c.nodes() == 0 }, 10*time.Second, 5*time.Millisecond, "the collected dependents are forgotten")
	l, err := client.List(ctx, cache.GroupResource{Resource: "configmaps"}, cache.InNamespace("default"))
	require.NoError(t, err)
	assert.Len(t, l.Items, 200)
}
