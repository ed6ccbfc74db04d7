package etcd

import (
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLeaseExpirySharesAVersion records a fact the storage contract has to live with in etcd
// mode even without group commit: Events written within the lease reuse window share one
// lease, and when it ends etcd deletes all of its keys in one revision, so the watch cache
// receives their DELETED events at one version (in key order), not one version each; a watch
// resuming at that version gets all of them again (the contract of a shared version).
func TestLeaseExpirySharesAVersion(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	s, err := New(Config{Client: client, Prefix: fmt.Sprintf("/lease-%d", batchPrefixes.Add(1))})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	ctx := t.Context()
	const n = 3
	for i := range n {
		name := fmt.Sprintf("ev-%d", i)
		_, err := s.Create(ctx, cache.Key{Resource: "events", Namespace: "default", Name: name},
			map[string]any{"metadata": map[string]any{"name": name, "namespace": "default"}}, cache.WriteOptions{TTL: time.Hour})
		require.NoError(t, err)
	}
	s.leases.mu.Lock()
	require.Len(t, s.leases.byTTL, 1, "one lease for the three")
	id := s.leases.byTTL[time.Hour].id
	s.leases.mu.Unlock()
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{{Resource: "events"}}, ResourceVersion: s.ResourceVersion()})
	require.NoError(t, err)
	defer w.Stop()

	_, err = client.Revoke(ctx, id) // what its expiry does
	require.NoError(t, err)
	var got []cache.Event
	timeout := time.After(10 * time.Second)
	for len(got) < n {
		select {
		case ev, ok := <-w.Events():
			require.True(t, ok, "watch ended: %v", w.Err())
			got = append(got, ev)
		case <-timeout:
			t.Fatalf("saw %d of %d deletions", len(got), n)
		}
	}
	for i, ev := range got {
		assert.Equal(t, cache.Deleted, ev.Type)
		assert.Equal(t, fmt.Sprintf("ev-%d", i), ev.Object.Key().Name)
		assert.Equal(t, got[0].ResourceVersion, ev.ResourceVersion, "one revision for the lease's keys")
	}
	// A watcher cut off after the first deletion resumes at its version and gets them all.
	rw, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{{Resource: "events"}}, ResourceVersion: got[0].ResourceVersion})
	require.NoError(t, err)
	defer rw.Stop()
	for i := range n {
		select {
		case ev := <-rw.Events():
			assert.Equal(t, cache.Deleted, ev.Type)
			assert.Equal(t, fmt.Sprintf("ev-%d", i), ev.Object.Key().Name)
		case <-time.After(10 * time.Second):
			t.Fatalf("the resumed watch got %d of %d deletions", i, n)
		}
	}
	res, err := s.List(ctx, cache.GroupResource{Resource: "events"})
	require.NoError(t, err)
	assert.Empty(t, res.Items)
}
