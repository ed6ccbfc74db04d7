package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/namespaces"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The leader's work over a shared store: compaction and finishing namespaces.

// TestRunCompaction: each tick compacts at the revision seen at the previous tick, so etcd
// keeps one interval of history and no more.
func TestRunCompaction(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	s := newStore(t, client, cache.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	first, err := s.Create(ctx, cachetest.Key("default", "a"), cachetest.App("a", 1), cache.WriteOptions{})
	require.NoError(t, err)
	_, err = s.Create(ctx, cachetest.Key("default", "a2"), cachetest.App("a2", 1), cache.WriteOptions{})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.RunCompaction(ctx, 100*time.Millisecond) }()
	require.Eventually(t, func() bool {
		_, err := client.Get(t.Context(), "any", clientv3.WithRev(int64(first.ResourceVersion())))
		return errors.Is(err, rpctypes.ErrCompacted)
	}, 5*time.Second, 20*time.Millisecond, "the revision of a write made before the first tick is compacted by the second")
	latest, err := s.Create(ctx, cachetest.Key("default", "b"), cachetest.App("b", 1), cache.WriteOptions{})
	require.NoError(t, err)
	_, err = client.Get(t.Context(), "any", clientv3.WithRev(int64(latest.ResourceVersion())))
	require.NoError(t, err, "what was written within the last interval is kept")
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("RunCompaction did not return after its context ended")
	}
}

// TestFinishNamespaces: the namespace controller running on one replica finishes a namespace
// whose objects were created through another (the leader's part over a shared store): each
// pass deletes what its replica's cache holds once it caught up, finalizers honoured, and the
// namespace goes once the last finalizer, removed through the other replica, is gone.
func TestFinishNamespaces(t *testing.T) {
	t.Parallel()
	rs, a, b := writePaths(t)
	ctx := t.Context()
	ca, cb := a.Registry.Client("test"), b.Registry.Client("test")
	a.Namespaces(t, "team")
	_, err := ca.Create(ctx, configMapKey("team", "first"), configMap("first"))
	require.NoError(t, err)
	// Through b, an object with a finalizer and a plain one, both while b saw team Active.
	held := configMap("held")
	held["metadata"].(map[string]any)["finalizers"] = []any{"example.com/hold"}
	require.NoError(t, rs[1].WaitUntilFresh(ctx, 0))
	_, err = cb.Create(ctx, configMapKey("team", "held"), held)
	require.NoError(t, err)
	_, err = cb.Create(ctx, configMapKey("team", "late"), configMap("late"))
	require.NoError(t, err)
	nsKey := cache.Key{Resource: "namespaces", Name: "team"}
	marked, _, err := ca.Delete(ctx, nsKey, cache.Preconditions{})
	require.NoError(t, err)
	require.True(t, marked.Deleting())

	ctrl, err := namespaces.New(namespaces.Config{Client: ca})
	require.NoError(t, err)
	require.NoError(t, rs[0].WaitUntilFresh(ctx, 0))
	done, err := ctrl.Sync(ctx, "team")
	require.NoError(t, err)
	assert.False(t, done, "held is left")
	for _, name := range []string{"first", "late"} {
		_, err := rs[0].Get(ctx, configMapKey("team", name))
		assert.ErrorIs(t, err, cache.ErrNotFound, "%s was deleted", name)
	}
	h, err := rs[0].Get(ctx, configMapKey("team", "held"))
	require.NoError(t, err)
	assert.True(t, h.Deleting(), "held is marked, its finalizer honoured")
	ns, err := rs[0].Get(ctx, nsKey)
	require.NoError(t, err, "the namespace stays while held is there")
	assert.Contains(t, string(ns.Raw()), `Some content in the namespace has finalizers remaining: example.com/hold in 1 resource instances`)

	// The finalizer goes (through b); the next pass removes the namespace.
	_, err = rs[1].GuaranteedUpdate(ctx, configMapKey("team", "held"), cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
		return cache.Update{Remove: true}, nil
	}, cache.WriteOptions{})
	require.NoError(t, err)
	require.NoError(t, rs[0].WaitUntilFresh(ctx, 0))
	done, err = ctrl.Sync(ctx, "team")
	require.NoError(t, err)
	assert.True(t, done)
	_, err = rs[0].Get(ctx, nsKey)
	require.ErrorIs(t, err, cache.ErrNotFound, "the namespace goes with its last object")
}

// configMapKey is the key of ConfigMap name in namespace ns.
func configMapKey(ns, name string) cache.Key {
	return cache.Key{Resource: "configmaps", Namespace: ns, Name: name}
}

// configMap is the ConfigMap name.
func configMap(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}}
}
