package cachetest

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

// The contract of Encode and Restore: a snapshot's objects replace the store's, as they were
// (uid, timestamps, finalizers, status), at versions after every version issued before; every
// watcher ends with ErrGone and nothing resumes from before the restore.

// testEncode: Encode makes an object as the store keeps it, without a version, and stores
// nothing.
func testEncode(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	obj := App("web", 2)
	md(obj)["uid"] = "u-1"
	md(obj)["resourceVersion"] = "12"
	md(obj)["labels"] = map[string]any{"tier": "web"}
	md(obj)["finalizers"] = []any{"example.com/f"}
	md(obj)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
	o, err := s.Encode(Key("default", "web"), obj)
	require.NoError(t, err)
	assert.Zero(t, o.ResourceVersion())
	assert.Nil(t, Meta(t, o, "resourceVersion"), "the version is the store's to give")
	assert.Equal(t, "u-1", o.UID())
	assert.Equal(t, "web", o.Labels()["tier"])
	assert.Equal(t, []string{"example.com/f"}, o.Finalizers())
	assert.True(t, o.Deleting())
	assert.Equal(t, Key("default", "web"), o.Key())
	_, err = s.Get(ctx, Key("default", "web"))
	require.ErrorIs(t, err, cache.ErrNotFound, "Encode stores nothing")
	_, err = s.Encode(Key("default", ""), App("", 1))
	require.ErrorIs(t, err, cache.ErrInvalid, "a name is required")
}

// restored is the state the Restore case gives its store: an object encoded by the store, one
// read from another store, and one being deleted with a finalizer.
func restored(t *testing.T, f Factory, s cache.Interface) []*cache.Object {
	t.Helper()
	a := App("a", 1)
	md(a)["uid"] = "uid-a"
	md(a)["labels"] = map[string]any{"tier": "web"}
	md(a)["creationTimestamp"] = "2020-01-01T00:00:00Z"
	a["status"] = map[string]any{"phase": "Running"}
	ea, err := s.Encode(Key("default", "a"), a)
	require.NoError(t, err)

	other := f.New(t, cache.Config{})
	b := App("b", 2)
	md(b)["uid"] = "uid-b"
	md(b)["ownerReferences"] = []any{map[string]any{"apiVersion": "cloudnative.elide.dev/v1", "kind": "Application", "name": "a", "uid": "uid-a"}}
	eb, err := other.Create(ctx, Key("team", "b"), b, cache.WriteOptions{})
	require.NoError(t, err)

	c := App("c", 3)
	md(c)["uid"] = "uid-c"
	md(c)["finalizers"] = []any{"example.com/keep"}
	md(c)["deletionTimestamp"] = "2020-01-02T00:00:00Z"
	ec, err := s.Encode(Key("team", "c"), c)
	require.NoError(t, err)
	return []*cache.Object{ea, eb, ec}
}

func testRestore(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	create(t, s, "default", "gone", 1)
	create(t, s, "default", "a", 9) // replaced by the snapshot's a
	events := cache.GroupResource{Resource: "events"}
	_, err := s.Create(ctx, cache.Key{Resource: "events", Namespace: "default", Name: "e"}, map[string]any{"apiVersion": "v1", "kind": "Event"}, cache.WriteOptions{})
	require.NoError(t, err)
	before := s.ResourceVersion()
	apps, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}})
	require.NoError(t, err)
	defer apps.Stop()
	all, err := s.Watch(ctx, cache.WatchOptions{SendInitialEvents: true})
	require.NoError(t, err)
	defer all.Stop()
	Collect(t, all, 4, wait) // three objects and the bookmark

	objects := restored(t, f, s)
	rv, err := s.Restore(ctx, objects, cache.RestoreOptions{})
	require.NoError(t, err)
	assert.Greater(t, rv, before, "versions move forward")

	require.ErrorIs(t, Closed(t, apps, wait), cache.ErrGone, "watchers end with a 410 and list again")
	require.ErrorIs(t, Closed(t, all, wait), cache.ErrGone)
	_, err = s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}, ResourceVersion: before})
	require.ErrorIs(t, err, cache.ErrGone, "nothing resumes from before the restore")
	require.ErrorIs(t, s.CheckResourceVersion(before, Applications), cache.ErrGone)
	require.ErrorIs(t, s.CheckResourceVersion(before), cache.ErrGone)

	res, err := s.List(ctx, Applications)
	require.NoError(t, err)
	assert.Equal(t, []string{"default/a", "team/b", "team/c"}, names(res))
	assert.GreaterOrEqual(t, res.ResourceVersion, rv, "a list carries the restore's version")
	for i, o := range res.Items {
		assert.Greater(t, o.ResourceVersion(), before, "%s has a new version", o.Key())
		assert.LessOrEqual(t, o.ResourceVersion(), rv)
		assert.Equal(t, fmt.Sprint(o.ResourceVersion()), Meta(t, o, "resourceVersion"))
		want := Decode(t, objects[i])
		got := Decode(t, o)
		delete(md(want), "resourceVersion")
		delete(md(got), "resourceVersion")
		assert.Equal(t, want, got, "%s is stored as it was but for its version", o.Key())
		assert.Equal(t, objects[i].UID(), o.UID())
	}
	assert.True(t, res.Items[2].Deleting())
	assert.Equal(t, []string{"example.com/keep"}, res.Items[2].Finalizers())
	ev, err := s.List(ctx, events)
	require.NoError(t, err)
	assert.Empty(t, ev.Items, "what the snapshot does not hold is gone")
	sel, err := labels.Parse("tier=web")
	require.NoError(t, err)
	res, err = s.List(ctx, Applications, cache.MatchingLabels(sel))
	require.NoError(t, err)
	assert.Equal(t, []string{"default/a"}, names(res), "the index came along")

	// A watch from the restore's version gets what follows, and writes go on after it.
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}, ResourceVersion: rv})
	require.NoError(t, err)
	defer w.Stop()
	o := create(t, s, "default", "after", 1)
	assert.Greater(t, o.ResourceVersion(), rv)
	assert.Equal(t, []string{"ADDED after"}, types(Collect(t, w, 1, wait)))
	u, err := modify(t, s, Key("team", "c"), func(obj map[string]any) { md(obj)["finalizers"] = []any{} })
	require.NoError(t, err)
	assert.Greater(t, u.ResourceVersion(), o.ResourceVersion(), "a restored object updates like any other")
	ev2 := Collect(t, w, 1, wait)[0]
	assert.Equal(t, "MODIFIED c", types([]cache.Event{ev2})[0])
	assert.Equal(t, json.Number("3"), Decode(t, ev2.Object)["spec"].(map[string]any)["replicas"])
}

// testRestoreEmpty: restoring nothing empties the store, and still moves the version on, so a
// list from before cannot be resumed.
func testRestoreEmpty(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	create(t, s, "default", "x", 1)
	before := s.ResourceVersion()
	w, err := s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()
	rv, err := s.Restore(ctx, nil, cache.RestoreOptions{})
	require.NoError(t, err)
	assert.Greater(t, rv, before)
	require.ErrorIs(t, Closed(t, w, wait), cache.ErrGone)
	res, err := s.List(ctx, Applications)
	require.NoError(t, err)
	assert.Empty(t, res.Items)
	assert.Empty(t, s.Counts())
	_, err = s.Watch(ctx, cache.WatchOptions{ResourceVersion: before})
	require.ErrorIs(t, err, cache.ErrGone)
}

// testRestoreInvalid: a restore holding a key twice, or an object without a name, changes
// nothing.
func testRestoreInvalid(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	kept := create(t, s, "default", "kept", 1)
	w, err := s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()
	one, err := s.Encode(Key("default", "x"), App("x", 1))
	require.NoError(t, err)
	two, err := s.Encode(Key("default", "x"), App("x", 2))
	require.NoError(t, err)
	_, err = s.Restore(ctx, []*cache.Object{one, two}, cache.RestoreOptions{})
	require.ErrorIs(t, err, cache.ErrInvalid)
	_, err = s.Restore(ctx, []*cache.Object{one, nil}, cache.RestoreOptions{})
	require.ErrorIs(t, err, cache.ErrInvalid)
	got, err := s.Get(ctx, Key("default", "kept"))
	require.NoError(t, err)
	assert.Equal(t, kept.ResourceVersion(), got.ResourceVersion(), "nothing was restored")
	_, err = s.Get(ctx, Key("default", "x"))
	require.ErrorIs(t, err, cache.ErrNotFound)
	ExpectNone(t, w, 50*time.Millisecond)
}
