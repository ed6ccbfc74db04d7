package etcd_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/etcd"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// seed creates n Applications in namespace default.
func seed(t *testing.T, s cache.Interface, n int) {
	t.Helper()
	for i := range n {
		_, err := s.Create(t.Context(), cachetest.Key("default", fmt.Sprint("seed-", i)), cachetest.App(fmt.Sprint("seed-", i), 1), cache.WriteOptions{})
		require.NoError(t, err)
	}
}

// TestRestoreAcrossReplicas: a restore through one replica, larger than one etcd transaction
// takes, reaches the other replica as one change: its watchers end with a 410 without seeing
// any of it event by event, and its next consistent read holds exactly the snapshot, at the
// same versions as the restoring replica. Events get their etcd lease again.
func TestRestoreAcrossReplicas(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	rs := replicas(t, client, 2, cache.Config{})
	a, b := rs[0], rs[1]
	ctx := t.Context()
	seed(t, a, 3)
	require.NoError(t, b.WaitUntilFresh(ctx, 0))
	w, err := b.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()

	const n = 250 // three transactions of puts
	var objects []*cache.Object
	for i := range n {
		obj := cachetest.App(fmt.Sprint("app-", i), 1)
		obj["metadata"].(map[string]any)["uid"] = fmt.Sprint("uid-", i)
		o, err := a.Encode(cachetest.Key("default", fmt.Sprint("app-", i)), obj)
		require.NoError(t, err)
		objects = append(objects, o)
	}
	ev, err := a.Encode(cache.Key{Resource: "events", Namespace: "default", Name: "e"}, map[string]any{"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": "e"}})
	require.NoError(t, err)
	objects = append(objects, ev)
	rv, err := a.Restore(ctx, objects, cache.RestoreOptions{TTL: func(gr cache.GroupResource) time.Duration {
		if gr.Resource == "events" {
			return time.Hour
		}
		return 0
	}})
	require.NoError(t, err)

	var seen []string
	for e := range w.Events() {
		seen = append(seen, string(e.Type)+" "+e.Object.Key().String())
	}
	require.ErrorIs(t, w.Err(), cache.ErrGone)
	assert.Empty(t, seen, "the other replica sees none of the restore event by event")

	require.NoError(t, b.WaitUntilFresh(ctx, 0))
	got, err := b.List(ctx, cachetest.Applications)
	require.NoError(t, err)
	require.Len(t, got.Items, n)
	mine, err := a.List(ctx, cachetest.Applications)
	require.NoError(t, err)
	for i, o := range got.Items {
		assert.Equal(t, string(mine.Items[i].Raw()), string(o.Raw()), "the same bytes and versions on both replicas")
		assert.True(t, strings.HasPrefix(o.UID(), "uid-"))
	}
	assert.GreaterOrEqual(t, got.ResourceVersion, rv)
	resp, err := client.Get(ctx, "/", clientv3.WithPrefix())
	require.NoError(t, err)
	leased := false
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/core/events/default/e") {
			leased = kv.Lease != 0
		}
	}
	assert.True(t, leased, "a restored Event carries its etcd lease")
}

// TestRestoreInProgress: while a restore's key is there (one in progress, or left by a restorer
// that died), a replica keeps serving the state from before, refuses a second restore, and
// lists again once the key is gone (its lease expired, or the restore ended).
func TestRestoreInProgress(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	prefix := fmt.Sprintf("/inprogress-%d", prefixes.Add(1))
	a, err := etcd.New(etcd.Config{Client: client, Prefix: prefix})
	require.NoError(t, err)
	t.Cleanup(a.Close)
	ctx := t.Context()
	seed(t, a, 1)
	w, err := a.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()

	_, err = client.Put(ctx, prefix+"/restore", "someone else")
	require.NoError(t, err)
	_, err = a.Restore(ctx, nil, cache.RestoreOptions{})
	require.ErrorIs(t, err, cache.ErrConflict, "one restore at a time")
	// A write meanwhile (as a restorer's own) is not served until the restore ends.
	_, err = client.Put(ctx, prefix+"/cloudnative.elide.dev/applications/default/during", `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"during","namespace":"default"}}`)
	require.NoError(t, err)
	require.NoError(t, a.WaitUntilFresh(ctx, 0))
	_, err = a.Get(ctx, cachetest.Key("default", "during"))
	require.ErrorIs(t, err, cache.ErrNotFound, "half a restore is never served")
	cachetest.ExpectNone(t, w, 100*time.Millisecond)

	_, err = client.Delete(ctx, prefix+"/restore")
	require.NoError(t, err)
	require.ErrorIs(t, cachetest.Closed(t, w, wait), cache.ErrGone)
	require.Eventually(t, func() bool {
		_, err := a.Get(ctx, cachetest.Key("default", "during"))
		return err == nil
	}, wait, 10*time.Millisecond, "listed again once the restore ended")

	// A replica starting while a restore runs waits for it to end.
	_, err = client.Put(ctx, prefix+"/restore", "someone else")
	require.NoError(t, err)
	_, err = etcd.New(etcd.Config{Client: client, Prefix: prefix, StartTimeout: 300 * time.Millisecond})
	require.Error(t, err, "a list finding a restore in progress waits for its end")
	_, err = client.Delete(ctx, prefix+"/restore")
	require.NoError(t, err)
}
