package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/registry/registrytest"
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

// TestFinishNamespaces: objects that reached a Terminating namespace behind the deleting
// replica's back (created through another replica that had not seen the namespace marked) are
// deleted by the leader's pass, finalizers honoured, and the namespace goes with the last.
func TestFinishNamespaces(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	rs := replicas(t, client, 2, cache.Config{})
	a := registrytest.New(t, registrytest.Options{Storage: rs[0]})
	b := registrytest.New(t, registrytest.Options{Storage: rs[1]})
	ctx := t.Context()
	ca, cb := a.Registry.Client("test"), b.Registry.Client("test")
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
	// a marks team Terminating; its own cascade would delete only what its cache held at that
	// moment, so here none runs at all: the leader's pass has everything left to do.
	nsKey := cache.Key{Resource: "namespaces", Name: "team"}
	marked, err := rs[0].GuaranteedUpdate(ctx, nsKey, cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
		obj := cachetest.Decode(t, cur)
		obj["metadata"].(map[string]any)["deletionTimestamp"] = "2026-11-24T00:00:00Z"
		obj["status"] = map[string]any{"phase": "Terminating"}
		return cache.Update{Object: obj}, nil
	}, cache.WriteOptions{})
	require.NoError(t, err)
	require.True(t, marked.Deleting())

	require.NoError(t, rs[0].WaitUntilFresh(ctx, 0))
	require.NoError(t, a.Registry.FinishNamespaces(ctx))
	for _, name := range []string{"first", "late"} {
		_, err := rs[0].Get(ctx, configMapKey("team", name))
		assert.ErrorIs(t, err, cache.ErrNotFound, "%s was deleted", name)
	}
	h, err := rs[0].Get(ctx, configMapKey("team", "held"))
	require.NoError(t, err)
	assert.True(t, h.Deleting(), "held is marked, its finalizer honoured")
	_, err = rs[0].Get(ctx, nsKey)
	require.NoError(t, err, "the namespace stays while held is there")

	// The finalizer goes (through b); the next pass removes the namespace.
	_, err = rs[1].GuaranteedUpdate(ctx, configMapKey("team", "held"), cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
		return cache.Update{Remove: true}, nil
	}, cache.WriteOptions{})
	require.NoError(t, err)
	require.NoError(t, rs[0].WaitUntilFresh(ctx, 0))
	require.NoError(t, a.Registry.FinishNamespaces(ctx))
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
