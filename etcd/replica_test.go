package etcd_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/etcd"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

const wait = 5 * time.Second

// replicas makes n stores sharing one prefix, as replicas of one opemu do.
func replicas(t *testing.T, client *clientv3.Client, n int, cfg cache.Config) []*etcd.Store {
	t.Helper()
	prefix := fmt.Sprintf("/replicas-%d", prefixes.Add(1))
	var out []*etcd.Store
	for range n {
		s, err := etcd.New(etcd.Config{Client: client, Prefix: prefix, Cache: cfg})
		require.NoError(t, err)
		t.Cleanup(s.Close)
		out = append(out, s)
	}
	return out
}

// writePaths makes two replicas over a fresh etcd and the write path over each.
func writePaths(t *testing.T) (rs []*etcd.Store, a, b *registrytest.Env) {
	t.Helper()
	rs = replicas(t, etcdtest.Start(t).Client(t), 2, cache.Config{})
	return rs, registrytest.New(t, registrytest.Options{Storage: rs[0]}), registrytest.New(t, registrytest.Options{Storage: rs[1]})
}

// TestReplicasShareOneTruth: a write through one replica is seen by another after a
// consistent read, with the same resourceVersion and the same bytes; a conflicting write
// through the other, decided on its stale cache, is re-decided on etcd's state; a watch opened
// on one replica and resumed on the other from the last version repeats and loses nothing.
func TestReplicasShareOneTruth(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	rs := replicas(t, client, 2, cache.Config{})
	a, b := rs[0], rs[1]
	ctx := t.Context()
	key := cachetest.Key("default", "web")

	w, err := a.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}})
	require.NoError(t, err)
	created, err := a.Create(ctx, key, cachetest.App("web", 1), cache.WriteOptions{})
	require.NoError(t, err)
	require.NoError(t, b.WaitUntilFresh(ctx, 0))
	got, err := b.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, created.ResourceVersion(), got.ResourceVersion(), "the same version on every replica")
	assert.Equal(t, string(created.Raw()), string(got.Raw()), "the same bytes on every replica")

	// Increments through both replicas at once: each decided on its own cache, none lost.
	inc := func(s *etcd.Store) error {
		_, err := s.GuaranteedUpdate(ctx, key, cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
			obj := cachetest.Decode(t, cur)
			spec := obj["spec"].(map[string]any)
			n, _ := spec["replicas"].(json.Number).Int64()
			spec["replicas"] = json.Number(fmt.Sprint(n + 1))
			return cache.Update{Object: obj}, nil
		}, cache.WriteOptions{})
		return err
	}
	errs := make(chan error, 40)
	for i := range 40 {
		go func() { errs <- inc(rs[i%2]) }()
	}
	for range 40 {
		require.NoError(t, <-errs)
	}
	require.NoError(t, a.WaitUntilFresh(ctx, 0))
	got, err = a.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, json.Number("41"), cachetest.Decode(t, got)["spec"].(map[string]any)["replicas"])

	// The watch on a, then resumed on b from the last version it delivered.
	evs := cachetest.Collect(t, w, 21, wait)
	w.Stop()
	last := evs[len(evs)-1].ResourceVersion
	rest, err := b.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}, ResourceVersion: last})
	require.NoError(t, err)
	more := cachetest.Collect(t, rest, 20, wait)
	cachetest.ExpectNone(t, rest, 50*time.Millisecond)
	rest.Stop()
	all := append(evs, more...)
	// Versions rise (a progress-key write between two of them may leave a gap in etcd's
	// revisions, never in the object's); the counter shows each write once, in order.
	for i, ev := range all {
		if i > 0 {
			assert.Less(t, all[i-1].ResourceVersion, ev.ResourceVersion, "in order, no repeat")
		}
		spec := cachetest.Decode(t, ev.Object)["spec"].(map[string]any)
		assert.Equal(t, json.Number(fmt.Sprint(i+1)), spec["replicas"], "event %d: no write lost or repeated", i)
	}
	assert.Equal(t, got.ResourceVersion(), all[len(all)-1].ResourceVersion)

	// A stale precondition from the other replica's point of view is still judged on etcd.
	_, err = b.GuaranteedUpdate(ctx, key, cache.Preconditions{ResourceVersion: fmt.Sprint(got.ResourceVersion())}, func(cur *cache.Object) (cache.Update, error) {
		obj := cachetest.Decode(t, cur)
		obj["spec"].(map[string]any)["image"] = "nginx:1.28"
		return cache.Update{Object: obj}, nil
	}, cache.WriteOptions{})
	require.NoError(t, err)
	_, err = a.Create(ctx, key, cachetest.App("web", 1), cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrAlreadyExists)
}

// TestWatchFromAnotherReplicasVersion: a watch from a version issued through another replica
// that this one's cache has not reached yet waits for it instead of answering 410; one beyond
// etcd's revision was never issued, unless the watch waits for it (as kube-apiserver's watch
// cache does): it then sends the changes after it once etcd gets there. A read at it still
// times out.
func TestWatchFromAnotherReplicasVersion(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	rs := replicas(t, client, 2, cache.Config{})
	ctx := t.Context()
	o, err := rs[0].Create(ctx, cachetest.Key("default", "a"), cachetest.App("a", 1), cache.WriteOptions{})
	require.NoError(t, err)
	w, err := rs[1].Watch(ctx, cache.WatchOptions{ResourceVersion: o.ResourceVersion()})
	require.NoError(t, err)
	w.Stop()
	_, err = rs[1].Watch(ctx, cache.WatchOptions{ResourceVersion: o.ResourceVersion() + 1000})
	require.ErrorIs(t, err, cache.ErrGone, "never issued")
	w, err = rs[1].Watch(ctx, cache.WatchOptions{ResourceVersion: o.ResourceVersion() + 1, WaitForVersion: true})
	require.NoError(t, err)
	defer w.Stop()
	var first *cache.Object // the first write after the version (etcd may have taken it itself)
	for i := 0; first == nil; i++ {
		c, err := rs[0].Create(ctx, cachetest.Key("default", fmt.Sprint("b", i)), cachetest.App("b", 1), cache.WriteOptions{})
		require.NoError(t, err)
		if c.ResourceVersion() > o.ResourceVersion()+1 {
			first = c
		}
	}
	evs := cachetest.Collect(t, w, 1, 5*time.Second)
	assert.Equal(t, first.ResourceVersion(), evs[0].ResourceVersion, "only the changes after the version")
	require.ErrorIs(t, rs[1].WaitUntilFresh(ctx, o.ResourceVersion()+1000), cache.ErrTimeout)
}

// TestConsistentReadPastForeignWrites: writes outside the prefix move etcd's revision without
// an event for this store; a consistent read still returns at once, through the progress key.
func TestConsistentReadPastForeignWrites(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	s := newStore(t, client, cache.Config{})
	ctx := t.Context()
	for i := range 5 {
		_, err := client.Put(ctx, fmt.Sprint("/elsewhere/", i), "x")
		require.NoError(t, err)
	}
	start := time.Now()
	require.NoError(t, s.WaitUntilFresh(ctx, 0))
	assert.Less(t, time.Since(start), time.Second)
	resp, err := client.Get(ctx, "/elsewhere/4")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, s.ResourceVersion(), uint64(resp.Kvs[0].ModRevision))
	res, err := s.List(ctx, cachetest.Applications)
	require.NoError(t, err)
	assert.Empty(t, res.Items, "the progress key is not an object")
}

// TestCreateIntoNamespaceOfAnotherReplica: a create through one replica into a namespace just
// created through another is admitted, though its cache may not hold the namespace yet (the
// write path looks a missing namespace up again after a consistent read, as kube-apiserver
// looks up live one its informer lacks); a namespace that exists nowhere is still a 404.
func TestCreateIntoNamespaceOfAnotherReplica(t *testing.T) {
	t.Parallel()
	_, a, b := writePaths(t)
	ctx := t.Context()
	cb := b.Registry.Client("test")
	for i := range 10 {
		ns := fmt.Sprint("team-", i)
		a.Namespaces(t, ns)
		_, err := cb.Create(ctx, configMapKey(ns, "cm"), configMap("cm"))
		require.NoError(t, err, "created through a, admitted through b at once")
	}
	_, err := cb.Create(ctx, configMapKey("nowhere", "cm"), configMap("cm"))
	require.True(t, apierrors.IsNotFound(err), "%v", err)
}

// TestTooLarge: an object larger than etcd takes is ErrTooLarge (a 413), not an etcd error.
func TestTooLarge(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	s := newStore(t, client, cache.Config{})
	obj := cachetest.App("big", 1)
	obj["spec"].(map[string]any)["blob"] = strings.Repeat("x", 2<<20)
	_, err := s.Create(t.Context(), cachetest.Key("default", "big"), obj, cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrTooLarge)
	var cerr *cache.Error
	require.ErrorAs(t, err, &cerr)
	assert.Contains(t, cerr.Message, "etcd")
}

// TestTTL: an object written with a TTL goes when its etcd lease expires (a DELETED event).
func TestTTL(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	s := newStore(t, client, cache.Config{})
	ctx := t.Context()
	w, err := s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()
	_, err = s.Create(ctx, cachetest.Key("default", "short"), cachetest.App("short", 1), cache.WriteOptions{TTL: time.Second})
	require.NoError(t, err)
	_, err = s.Create(ctx, cachetest.Key("default", "long"), cachetest.App("long", 1), cache.WriteOptions{})
	require.NoError(t, err)
	evs := cachetest.Collect(t, w, 3, wait)
	assert.Equal(t, cache.Deleted, evs[2].Type)
	assert.Equal(t, "short", evs[2].Object.Key().Name)
	_, err = s.Get(ctx, cachetest.Key("default", "long"))
	require.NoError(t, err)
}

// TestEtcdDown: while etcd is down every call fails within its bound with an error naming
// etcd, reads from the cache still answer; when etcd is back writes succeed again without a
// new store, and the cache catches up with writes made meanwhile through another client.
func TestEtcdDown(t *testing.T) {
	t.Parallel()
	srv := etcdtest.Start(t)
	client := srv.Client(t)
	s, err := etcd.New(etcd.Config{Client: client, Prefix: "/down", RequestTimeout: time.Second, FreshTimeout: time.Second})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	ctx := t.Context()
	before, err := s.Create(ctx, cachetest.Key("default", "before"), cachetest.App("before", 1), cache.WriteOptions{})
	require.NoError(t, err)

	srv.Kill(t)
	start := time.Now()
	_, err = s.Create(ctx, cachetest.Key("default", "during"), cachetest.App("during", 1), cache.WriteOptions{})
	took := time.Since(start)
	require.Error(t, err)
	assert.True(t, errors.Is(err, cache.ErrUnavailable) || errors.Is(err, cache.ErrTimeout), "%v", err)
	assert.Contains(t, err.Error(), "etcd")
	assert.Less(t, took, 2*time.Second, "bounded by RequestTimeout")
	assert.Error(t, s.WaitUntilFresh(ctx, 0))
	assert.Error(t, s.Health(ctx))
	got, err := s.Get(ctx, cachetest.Key("default", "before"))
	require.NoError(t, err, "the cache still answers")
	assert.Same(t, before, got)

	srv.Restart(t)
	other := srv.Client(t)
	_, err = other.Put(ctx, "/down/cloudnative.elide.dev/applications/default/outside", `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"outside","namespace":"default"},"spec":{"replicas":1,"image":"x"}}`)
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := s.Create(ctx, cachetest.Key("default", "after"), cachetest.App("after", 1), cache.WriteOptions{})
		assert.True(c, err == nil || errors.Is(err, cache.ErrAlreadyExists), "%v", err)
	}, 10*time.Second, 100*time.Millisecond)
	require.NoError(t, s.WaitUntilFresh(ctx, 0))
	_, err = s.Get(ctx, cachetest.Key("default", "outside"))
	require.NoError(t, err, "the feed resumed")
	require.NoError(t, s.Health(ctx))
	assert.Zero(t, s.Relists(), "nothing was compacted: the watch resumed without a re-list")
}
