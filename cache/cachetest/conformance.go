package cachetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// NewStore makes a fresh store for one conformance case; cfg carries what the case needs
// (history size, watch buffer, start version); the factory may add its own settings.
type NewStore func(t *testing.T, cfg cache.Config) cache.Interface

const wait = 5 * time.Second

// Factory makes the stores of one conformance run and declares what they do where stores
// differ: an assertion about one of these is made as the declaration says.
type Factory struct {
	New NewStore
	// OwnCounter: versions are the store's own counter, starting at Config.StartResourceVersion
	// (the time in microseconds when zero, below 2^53). Without it they come from a counter the
	// store does not own (etcd's revision) and a new store starts where that counter stands.
	OwnCounter bool
	// RemoveCarriesUpdate: the DELETED event of an update that removes the object carries the
	// state the update gave (cache.Update.Object). Without it, it carries the last state stored,
	// as kube-apiserver's over etcd does (a removal stores no new state).
	RemoveCarriesUpdate bool
	// SharedCounter: the stores of this factory take their versions from one counter (one
	// etcd), so the cases run one at a time; each then sees one version per write of its own.
	SharedCounter bool
}

// RunConformance checks the storage contract (cache.Interface) behind SPEC §2 and §5.2:
// versions, create, guaranteed updates and deletes with preconditions, dry runs, selectors,
// paging, watch and its history. The rules of objects built on it (uid, generation,
// finalizers, namespaces) are checked by registrytest.RunRules. The stores are the in-memory
// kind: their own counter, removals carrying the update (see RunFactory for others).
func RunConformance(t *testing.T, newStore NewStore) {
	RunFactory(t, Factory{New: newStore, OwnCounter: true, RemoveCarriesUpdate: true})
}

// RunFactory is RunConformance for stores that declare how they differ (Factory).
func RunFactory(t *testing.T, f Factory) {
	cases := []struct {
		name string
		fn   func(t *testing.T, f Factory)
	}{
		{"ResourceVersionsIncrease", testResourceVersions},
		{"CreateStoresAsGiven", testCreateStoresAsGiven},
		{"CreateConflicts", testCreateConflicts},
		{"UpdatePreconditions", testUpdatePreconditions},
		{"UpdateRetriesOnRace", testUpdateRetriesOnRace},
		{"UpdateRemoves", testUpdateRemoves},
		{"NoOpUpdate", testNoOpUpdate},
		{"Delete", testDelete},
		{"DeletePreconditions", testDeletePreconditions},
		{"DryRun", testDryRun},
		{"DropResource", testDropResource},
		{"ListSelectors", testListSelectors},
		{"ListPaging", testListPaging},
		{"ListOrder", testListOrder},
		{"ListAtVersion", testListAtVersion},
		{"WatchFromNow", testWatchFromNow},
		{"WatchResume", testWatchResume},
		{"WatchInitialEvents", testWatchInitialEvents},
		{"WatchExpired", testWatchExpired},
		{"WatchFuture", testWatchFuture},
		{"HistoryPerResource", testHistoryPerResource},
		{"WatchSelectorTransitions", testWatchSelectorTransitions},
		{"WatchNamespaceFilter", testWatchNamespaceFilter},
		{"SlowWatcher", testSlowWatcher},
		{"WatchStop", testWatchStop},
		{"StoreClose", testStoreClose},
		{"Progress", testProgress},
		{"Encode", testEncode},
		{"Restore", testRestore},
		{"RestoreEmpty", testRestoreEmpty},
		{"RestoreInvalid", testRestoreInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !f.SharedCounter {
				t.Parallel()
			}
			c.fn(t, f)
		})
	}
}

var ctx = context.Background()

func create(t *testing.T, s cache.Interface, ns, name string, replicas int) *cache.Object {
	t.Helper()
	o, err := s.Create(ctx, Key(ns, name), App(name, replicas), cache.WriteOptions{})
	require.NoError(t, err)
	return o
}

// modify updates the object at key with fn applied to its current state.
func modify(t *testing.T, s cache.Interface, key cache.Key, fn func(obj map[string]any)) (*cache.Object, error) {
	t.Helper()
	return s.GuaranteedUpdate(ctx, key, cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
		obj := Decode(t, cur)
		fn(obj)
		return cache.Update{Object: obj}, nil
	}, cache.WriteOptions{})
}

// replace updates the object at key to obj under pre.
func replace(s cache.Interface, key cache.Key, pre cache.Preconditions, obj map[string]any, opts cache.WriteOptions) (*cache.Object, error) {
	return s.GuaranteedUpdate(ctx, key, pre, func(*cache.Object) (cache.Update, error) {
		return cache.Update{Object: obj}, nil
	}, opts)
}

func md(obj map[string]any) map[string]any { return obj["metadata"].(map[string]any) }

func testResourceVersions(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{StartResourceVersion: 1000})
	if f.OwnCounter {
		assert.Equal(t, uint64(1000), s.StartResourceVersion())
	}
	prev := s.ResourceVersion()
	// A store may have written at start (nothing yet, or what an earlier run left).
	assert.GreaterOrEqual(t, prev, s.StartResourceVersion())
	for i := range 5 {
		o := create(t, s, "default", fmt.Sprint("a", i), 1)
		assert.Equal(t, prev+1, o.ResourceVersion(), "one version per write")
		prev = o.ResourceVersion()
	}
	res, err := s.List(ctx, Applications)
	require.NoError(t, err)
	assert.Equal(t, s.ResourceVersion(), res.ResourceVersion, "a list carries the counter")

	now := uint64(time.Now().UnixMicro())
	d := f.New(t, cache.Config{})
	if f.OwnCounter {
		assert.InDelta(t, float64(now), float64(d.StartResourceVersion()), float64(time.Minute.Microseconds()), "the default start is the time in microseconds")
	} else {
		assert.GreaterOrEqual(t, d.StartResourceVersion(), s.ResourceVersion(), "a new store starts where the shared counter stands")
	}
	assert.Less(t, d.StartResourceVersion(), uint64(1)<<53, "safe in JavaScript")
}

// testCreateStoresAsGiven: the store sets resourceVersion and keeps everything else as given;
// stamping uid, timestamps and generation is the write path's (registrytest.RunRules).
func testCreateStoresAsGiven(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	obj := App("web", 1)
	md(obj)["uid"] = "given-uid"
	md(obj)["resourceVersion"] = "42"
	md(obj)["generation"] = json.Number("9")
	md(obj)["labels"] = map[string]any{"a": "b"}
	md(obj)["finalizers"] = []any{"example.com/f"}
	o, err := s.Create(ctx, Key("default", "web"), obj, cache.WriteOptions{})
	require.NoError(t, err)
	m := md(Decode(t, o))
	assert.Equal(t, fmt.Sprint(o.ResourceVersion()), m["resourceVersion"])
	assert.Equal(t, "given-uid", m["uid"])
	assert.Equal(t, "given-uid", o.UID())
	assert.Equal(t, int64(9), o.Generation())
	assert.Equal(t, "b", o.Labels()["a"])
	assert.Equal(t, []string{"example.com/f"}, o.Finalizers())
	assert.False(t, o.Deleting())
	_, err = s.Create(ctx, Key("default", ""), App("", 1), cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrInvalid, "a name is required")
}

func testCreateConflicts(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	create(t, s, "default", "web", 1)
	_, err := s.Create(ctx, Key("default", "web"), App("web", 2), cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrAlreadyExists)
	_, err = s.Create(ctx, Key("other", "web"), App("web", 2), cache.WriteOptions{})
	require.NoError(t, err, "names are per namespace")
	_, err = s.Get(ctx, Key("default", "missing"))
	require.ErrorIs(t, err, cache.ErrNotFound)
}

func testUpdatePreconditions(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	o := create(t, s, "default", "web", 1)
	key := Key("default", "web")
	_, err := replace(s, key, cache.Preconditions{ResourceVersion: fmt.Sprint(o.ResourceVersion() - 1)}, App("web", 2), cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrConflict)
	_, err = replace(s, key, cache.Preconditions{UID: "other"}, App("web", 2), cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrConflict)

	u, err := replace(s, key, cache.Preconditions{ResourceVersion: fmt.Sprint(o.ResourceVersion())}, App("web", 2), cache.WriteOptions{})
	require.NoError(t, err)
	assert.Greater(t, u.ResourceVersion(), o.ResourceVersion())
	assert.Equal(t, json.Number("2"), Decode(t, u)["spec"].(map[string]any)["replicas"])

	u2, err := replace(s, key, cache.Preconditions{}, App("web", 3), cache.WriteOptions{})
	require.NoError(t, err, "without preconditions the update is unconditional")
	assert.Greater(t, u2.ResourceVersion(), u.ResourceVersion())

	_, err = replace(s, Key("default", "missing"), cache.Preconditions{}, App("missing", 1), cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrNotFound)
	boom := errors.New("boom")
	_, err = s.GuaranteedUpdate(ctx, key, cache.Preconditions{}, func(*cache.Object) (cache.Update, error) { return cache.Update{}, boom }, cache.WriteOptions{})
	require.ErrorIs(t, err, boom, "an error from try ends the update")
	got, err := s.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, u2.ResourceVersion(), got.ResourceVersion())
}

// testUpdateRetriesOnRace: when another write commits between try and the commit, try runs
// again on the newer object, so no update is lost.
func testUpdateRetriesOnRace(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	create(t, s, "default", "web", 0)
	key := Key("default", "web")
	const writers, each = 4, 25
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range each {
				_, err := modify(t, s, key, func(o map[string]any) {
					spec := o["spec"].(map[string]any)
					n, _ := spec["replicas"].(json.Number).Int64()
					spec["replicas"] = json.Number(fmt.Sprint(n + 1))
				})
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	got, err := s.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, json.Number(fmt.Sprint(writers*each)), Decode(t, got)["spec"].(map[string]any)["replicas"], "every increment applied once")

	// try sees the newer object on its second call.
	calls := 0
	_, err = s.GuaranteedUpdate(ctx, key, cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
		calls++
		obj := Decode(t, cur)
		if calls == 1 {
			_, err := modify(t, s, key, func(o map[string]any) { md(o)["labels"] = map[string]any{"raced": "yes"} })
			require.NoError(t, err)
		} else {
			assert.Equal(t, map[string]any{"raced": "yes"}, md(obj)["labels"], "the retry starts from the newer object")
		}
		obj["spec"].(map[string]any)["image"] = "nginx:1.28"
		return cache.Update{Object: obj}, nil
	}, cache.WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2, calls)
}

// testUpdateRemoves: an update may remove the object instead; its DELETED event carries the
// state try gave.
func testUpdateRemoves(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	o := create(t, s, "default", "web", 1)
	key := Key("default", "web")
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}})
	require.NoError(t, err)
	defer w.Stop()
	last := App("web", 7)
	gone, err := s.GuaranteedUpdate(ctx, key, cache.Preconditions{}, func(*cache.Object) (cache.Update, error) {
		return cache.Update{Object: last, Remove: true}, nil
	}, cache.WriteOptions{})
	require.NoError(t, err)
	assert.Greater(t, gone.ResourceVersion(), o.ResourceVersion())
	ev := Collect(t, w, 1, wait)[0]
	assert.Equal(t, cache.Deleted, ev.Type)
	assert.Equal(t, gone.ResourceVersion(), ev.ResourceVersion)
	want := json.Number("7")
	if !f.RemoveCarriesUpdate {
		want = json.Number("1") // the last state stored
	}
	assert.Equal(t, want, Decode(t, ev.Object)["spec"].(map[string]any)["replicas"])
	_, err = s.Get(ctx, key)
	require.ErrorIs(t, err, cache.ErrNotFound)
}

func testNoOpUpdate(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	o := create(t, s, "default", "web", 1)
	w, err := s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()
	u, err := modify(t, s, Key("default", "web"), func(map[string]any) {})
	require.NoError(t, err)
	assert.Same(t, o, u, "the stored object is returned unchanged")
	assert.Equal(t, o.ResourceVersion(), s.ResourceVersion(), "no new version")
	ExpectNone(t, w, 50*time.Millisecond)
}

func testDelete(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	o := create(t, s, "default", "web", 1)
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}})
	require.NoError(t, err)
	defer w.Stop()
	d, err := s.Delete(ctx, Key("default", "web"), cache.Preconditions{}, cache.WriteOptions{})
	require.NoError(t, err)
	assert.Greater(t, d.ResourceVersion(), o.ResourceVersion(), "a deletion has its own version")
	ev := Collect(t, w, 1, wait)[0]
	assert.Equal(t, cache.Deleted, ev.Type)
	assert.Equal(t, d.ResourceVersion(), ev.ResourceVersion)
	_, err = s.Get(ctx, Key("default", "web"))
	require.ErrorIs(t, err, cache.ErrNotFound)
	_, err = s.Delete(ctx, Key("default", "web"), cache.Preconditions{}, cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrNotFound)
}

func testDeletePreconditions(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	o := create(t, s, "default", "web", 1)
	key := Key("default", "web")
	_, err := s.Delete(ctx, key, cache.Preconditions{UID: "other"}, cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrConflict)
	_, err = s.Delete(ctx, key, cache.Preconditions{ResourceVersion: "1"}, cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrConflict)
	_, err = s.Delete(ctx, key, cache.Preconditions{UID: o.UID(), ResourceVersion: fmt.Sprint(o.ResourceVersion())}, cache.WriteOptions{})
	require.NoError(t, err)
	_, err = s.Get(ctx, key)
	require.ErrorIs(t, err, cache.ErrNotFound)
}

func testDryRun(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	existing := create(t, s, "default", "web", 1)
	w, err := s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer w.Stop()
	rv := s.ResourceVersion()
	dry := cache.WriteOptions{DryRun: true}

	o, err := s.Create(ctx, Key("dry-ns", "new"), App("new", 1), dry)
	require.NoError(t, err)
	assert.Zero(t, o.ResourceVersion(), "a dry-run create has no resourceVersion")
	assert.Nil(t, Meta(t, o, "resourceVersion"))
	_, err = s.Create(ctx, Key("default", "web"), App("web", 1), dry)
	require.ErrorIs(t, err, cache.ErrAlreadyExists)
	u, err := replace(s, Key("default", "web"), cache.Preconditions{}, App("web", 9), dry)
	require.NoError(t, err)
	assert.Equal(t, json.Number("9"), Decode(t, u)["spec"].(map[string]any)["replicas"])
	d, err := s.Delete(ctx, Key("default", "web"), cache.Preconditions{}, dry)
	require.NoError(t, err)
	assert.Same(t, existing, d)

	assert.Equal(t, rv, s.ResourceVersion(), "nothing was written")
	got, err := s.Get(ctx, Key("default", "web"))
	require.NoError(t, err)
	assert.Same(t, existing, got)
	ExpectNone(t, w, 50*time.Millisecond)
}

// testDropResource: every object of one resource goes at once, a DELETED event each, and the
// watches on that resource alone end.
func testDropResource(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	create(t, s, "a", "x", 1)
	create(t, s, "b", "y", 1)
	events := cache.GroupResource{Resource: "events"}
	_, err := s.Create(ctx, cache.Key{Resource: "events", Namespace: "a", Name: "e"}, map[string]any{"apiVersion": "v1", "kind": "Event"}, cache.WriteOptions{})
	require.NoError(t, err)
	apps, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}})
	require.NoError(t, err)
	all, err := s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	defer all.Stop()
	n, err := s.DropResource(ctx, Applications)
	require.NoError(t, err)
	assert.Equal(t, 2, n)
	assert.Equal(t, []string{"DELETED x", "DELETED y"}, types(Collect(t, all, 2, wait)))
	require.ErrorIs(t, Closed(t, apps, wait), cache.ErrClosed, "watches on the dropped resource end")
	res, err := s.List(ctx, Applications)
	require.NoError(t, err)
	assert.Empty(t, res.Items)
	res, err = s.List(ctx, events)
	require.NoError(t, err)
	assert.Len(t, res.Items, 1, "other resources stay")
}

func labelled(t *testing.T, s cache.Interface, ns, name string, l map[string]any) {
	t.Helper()
	obj := App(name, 1)
	md(obj)["labels"] = l
	_, err := s.Create(ctx, Key(ns, name), obj, cache.WriteOptions{})
	require.NoError(t, err)
}

func names(res cache.ListResult) []string {
	var out []string
	for _, o := range res.Items {
		out = append(out, o.Key().Namespace+"/"+o.Key().Name)
	}
	return out
}

func testListSelectors(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	labelled(t, s, "a", "web", map[string]any{"tier": "web", "env": "prod"})
	labelled(t, s, "a", "db", map[string]any{"tier": "db", "env": "prod"})
	labelled(t, s, "b", "web", map[string]any{"tier": "web"})
	sel := func(s string) labels.Selector {
		l, err := labels.Parse(s)
		require.NoError(t, err)
		return l
	}
	fsel := func(s string) fields.Selector {
		f, err := fields.ParseSelector(s)
		require.NoError(t, err)
		return f
	}
	tests := []struct {
		name string
		opts []cache.ListOption
		want []string
	}{
		{"all", nil, []string{"a/db", "a/web", "b/web"}},
		{"namespace", []cache.ListOption{cache.InNamespace("a")}, []string{"a/db", "a/web"}},
		{"equality", []cache.ListOption{cache.MatchingLabels(sel("tier=web"))}, []string{"a/web", "b/web"}},
		{"set", []cache.ListOption{cache.MatchingLabels(sel("tier in (db),env"))}, []string{"a/db"}},
		{"not exists", []cache.ListOption{cache.MatchingLabels(sel("!env"))}, []string{"b/web"}},
		{"field name", []cache.ListOption{cache.MatchingFields(fsel("metadata.name=web"))}, []string{"a/web", "b/web"}},
		{"field namespace", []cache.ListOption{cache.MatchingFields(fsel("metadata.namespace!=a"))}, []string{"b/web"}},
		{"both", []cache.ListOption{cache.InNamespace("a"), cache.MatchingLabels(sel("env=prod")), cache.MatchingFields(fsel("metadata.name=db"))}, []string{"a/db"}},
	}
	for _, tt := range tests {
		res, err := s.List(ctx, Applications, tt.opts...)
		require.NoError(t, err)
		assert.Equal(t, tt.want, names(res), tt.name)
	}
	res, err := s.List(ctx, cache.GroupResource{Group: "x", Resource: "none"})
	require.NoError(t, err)
	assert.Empty(t, res.Items)
}

func testListPaging(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	for i := range 5 {
		create(t, s, "default", fmt.Sprint("app-", i), 1)
	}
	page, err := s.List(ctx, Applications, cache.Limit(2))
	require.NoError(t, err)
	assert.Equal(t, []string{"default/app-0", "default/app-1"}, names(page))
	assert.Equal(t, 3, page.Remaining)
	page, err = s.List(ctx, Applications, cache.Limit(2), cache.After("default", "app-1"))
	require.NoError(t, err)
	assert.Equal(t, []string{"default/app-2", "default/app-3"}, names(page))
	assert.Equal(t, 1, page.Remaining)
	page, err = s.List(ctx, Applications, cache.Limit(2), cache.After("default", "app-3"))
	require.NoError(t, err)
	assert.Equal(t, []string{"default/app-4"}, names(page))
	assert.Zero(t, page.Remaining)
}

// testListOrder: objects are listed in the order of their storage keys, "<namespace>/<name>"
// as a string, so a namespace extending another's name with "-" comes first.
func testListOrder(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	for _, k := range [][2]string{{"a", "y"}, {"a-b", "x"}, {"a", "x"}, {"ab", "x"}} {
		create(t, s, k[0], k[1], 1)
	}
	page, err := s.List(ctx, Applications)
	require.NoError(t, err)
	assert.Equal(t, []string{"a-b/x", "a/x", "a/y", "ab/x"}, names(page))
	page, err = s.List(ctx, Applications, cache.After("a-b", "x"))
	require.NoError(t, err)
	assert.Equal(t, []string{"a/x", "a/y", "ab/x"}, names(page))
	page, err = s.List(ctx, Applications, cache.After("a", "y"))
	require.NoError(t, err)
	assert.Equal(t, []string{"ab/x"}, names(page))
}

// testListAtVersion: a list at an earlier version shows the objects as they were then,
// rebuilt from the history; a version older than it or not issued yet is gone.
func testListAtVersion(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{WatchHistory: 4})
	create(t, s, "default", "a", 1)
	create(t, s, "default", "b", 2)
	at := s.ResourceVersion()
	_, err := modify(t, s, Key("default", "a"), func(o map[string]any) { o["spec"].(map[string]any)["replicas"] = json.Number("9") })
	require.NoError(t, err)
	_, err = s.Delete(ctx, Key("default", "b"), cache.Preconditions{}, cache.WriteOptions{})
	require.NoError(t, err)
	create(t, s, "default", "c", 3)
	create(t, s, "other", "d", 4)

	page, err := s.List(ctx, Applications, cache.AtVersion(at))
	require.NoError(t, err)
	assert.Equal(t, at, page.ResourceVersion)
	require.Equal(t, []string{"default/a", "default/b"}, names(page))
	assert.Equal(t, json.Number("1"), Decode(t, page.Items[0])["spec"].(map[string]any)["replicas"], "a as it was")
	page, err = s.List(ctx, Applications, cache.AtVersion(at), cache.InNamespace("default"), cache.Limit(1))
	require.NoError(t, err)
	assert.Equal(t, []string{"default/a"}, names(page))
	assert.Equal(t, 1, page.Remaining)
	page, err = s.List(ctx, Applications, cache.AtVersion(s.ResourceVersion()))
	require.NoError(t, err)
	assert.Equal(t, []string{"default/a", "default/c", "other/d"}, names(page), "now")

	create(t, s, "default", "e", 5) // the history (4) no longer reaches back to at
	_, err = s.List(ctx, Applications, cache.AtVersion(at))
	require.ErrorIs(t, err, cache.ErrGone, "older than the history")
	_, err = s.List(ctx, Applications, cache.AtVersion(s.ResourceVersion()+1))
	require.ErrorIs(t, err, cache.ErrGone, "not issued yet")
}

// testWatchFuture: a watch waiting for a version the store has not reached starts from now
// and sends only the changes after that version, as kube-apiserver's watch cache does; no
// bookmark is offered before the store reaches it.
func testWatchFuture(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	from := s.ResourceVersion() + 2
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}, ResourceVersion: from, WaitForVersion: true})
	require.NoError(t, err)
	defer w.Stop()
	_, ok := w.Progress()
	assert.False(t, ok, "no bookmark before the version")
	var first *cache.Object
	for i := 0; first == nil; i++ {
		if o := create(t, s, "default", fmt.Sprint("app-", i), 1); o.ResourceVersion() > from {
			first = o
		}
	}
	evs := Collect(t, w, 1, wait)
	assert.Equal(t, first.ResourceVersion(), evs[0].ResourceVersion, "the first change after the version")
	ExpectNone(t, w, 20*time.Millisecond)
}

func types(evs []cache.Event) []string {
	var out []string
	for _, e := range evs {
		name := ""
		if e.Object != nil {
			name = e.Object.Key().Name
		}
		out = append(out, string(e.Type)+" "+name)
	}
	return out
}

func testWatchFromNow(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	create(t, s, "default", "before", 1)
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}})
	require.NoError(t, err)
	defer w.Stop()
	create(t, s, "default", "after", 1)
	_, err = modify(t, s, Key("default", "after"), func(o map[string]any) { o["spec"].(map[string]any)["replicas"] = json.Number("2") })
	require.NoError(t, err)
	_, err = s.Delete(ctx, Key("default", "after"), cache.Preconditions{}, cache.WriteOptions{})
	require.NoError(t, err)
	evs := Collect(t, w, 3, wait)
	assert.Equal(t, []string{"ADDED after", "MODIFIED after", "DELETED after"}, types(evs))
	for i := 1; i < len(evs); i++ {
		assert.Greater(t, evs[i].ResourceVersion, evs[i-1].ResourceVersion)
		assert.Equal(t, evs[i].ResourceVersion, evs[i].Object.ResourceVersion())
	}
}

func testWatchResume(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	var rvs []uint64
	for i := range 6 {
		rvs = append(rvs, create(t, s, "default", fmt.Sprint("app-", i), 1).ResourceVersion())
	}
	for i, from := range rvs {
		w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}, ResourceVersion: from})
		require.NoError(t, err)
		evs := Collect(t, w, len(rvs)-1-i, wait)
		for j, ev := range evs {
			assert.Equal(t, rvs[i+1+j], ev.ResourceVersion, "exactly the events after %d, in order", from)
		}
		ExpectNone(t, w, 10*time.Millisecond)
		w.Stop()
	}
	// After the replay, live events follow with nothing in between.
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}, ResourceVersion: rvs[3]})
	require.NoError(t, err)
	defer w.Stop()
	create(t, s, "other", "live", 1)
	assert.Equal(t, []string{"ADDED app-4", "ADDED app-5", "ADDED live"}, types(Collect(t, w, 3, wait)))
}

func testWatchInitialEvents(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	create(t, s, "b", "x", 1)
	create(t, s, "a", "y", 1)
	create(t, s, "a", "x", 1)
	rv := s.ResourceVersion()
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}, SendInitialEvents: true})
	require.NoError(t, err)
	defer w.Stop()
	evs := Collect(t, w, 4, wait)
	assert.Equal(t, []string{"ADDED x", "ADDED y", "ADDED x", "BOOKMARK "}, types(evs))
	assert.Equal(t, "a", evs[0].Object.Key().Namespace, "key order")
	for _, ev := range evs {
		assert.Equal(t, rv, ev.ResourceVersion, "initial events carry the snapshot's version")
	}
	create(t, s, "a", "z", 1)
	assert.Equal(t, "ADDED z", types(Collect(t, w, 1, wait))[0])
}

func testWatchExpired(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{WatchHistory: 3})
	first := create(t, s, "default", "app-0", 1).ResourceVersion()
	for i := 1; i < 6; i++ {
		create(t, s, "default", fmt.Sprint("app-", i), 1)
	}
	gr := []cache.GroupResource{Applications}
	_, err := s.Watch(ctx, cache.WatchOptions{Resources: gr, ResourceVersion: first})
	require.ErrorIs(t, err, cache.ErrGone, "older than the history")
	_, err = s.Watch(ctx, cache.WatchOptions{Resources: gr, ResourceVersion: s.ResourceVersion() + 1})
	require.ErrorIs(t, err, cache.ErrGone, "never issued: in the future")
	_, err = s.Watch(ctx, cache.WatchOptions{Resources: gr, ResourceVersion: s.StartResourceVersion() - 1})
	require.ErrorIs(t, err, cache.ErrGone, "never issued: an earlier run")
	require.ErrorIs(t, s.CheckResourceVersion(first, Applications), cache.ErrGone)
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: gr, ResourceVersion: s.ResourceVersion() - 3})
	require.NoError(t, err, "the last 3 are still there")
	assert.Len(t, Collect(t, w, 3, wait), 3)
	w.Stop()
}

func testHistoryPerResource(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{WatchHistory: 5})
	from := create(t, s, "default", "app", 1).ResourceVersion()
	events := cache.GroupResource{Resource: "events"}
	for i := range 50 {
		_, err := s.Create(ctx, cache.Key{Resource: "events", Namespace: "default", Name: fmt.Sprint("e", i)},
			map[string]any{"apiVersion": "v1", "kind": "Event"}, cache.WriteOptions{})
		require.NoError(t, err)
	}
	create(t, s, "default", "app2", 1)
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}, ResourceVersion: from})
	require.NoError(t, err, "Event churn does not expire an Application watcher")
	assert.Equal(t, []string{"ADDED app2"}, types(Collect(t, w, 1, wait)))
	w.Stop()
	_, err = s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{events}, ResourceVersion: from})
	require.ErrorIs(t, err, cache.ErrGone)
	_, err = s.Watch(ctx, cache.WatchOptions{ResourceVersion: from})
	require.ErrorIs(t, err, cache.ErrGone, "a watch on everything needs every history")
}

func testWatchSelectorTransitions(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	create(t, s, "default", "web", 1)
	sel, err := labels.Parse("tier=web")
	require.NoError(t, err)
	w, err := s.Watch(ctx, cache.WatchOptions{Label: sel})
	require.NoError(t, err)
	defer w.Stop()
	key := Key("default", "web")
	setTier := func(v string) {
		_, err := modify(t, s, key, func(o map[string]any) { md(o)["labels"] = map[string]any{"tier": v} })
		require.NoError(t, err)
	}
	setTier("web")
	setTier("web2")
	setTier("web")
	_, err = modify(t, s, key, func(o map[string]any) { o["spec"].(map[string]any)["replicas"] = json.Number("7") })
	require.NoError(t, err)
	evs := Collect(t, w, 4, wait)
	assert.Equal(t, []string{"ADDED web", "DELETED web", "ADDED web", "MODIFIED web"}, types(evs))
	// Leaving the selector sends the last state that matched, at the version of the change.
	left := evs[1]
	assert.Equal(t, "web", left.Object.Labels()["tier"], "the last state that matched")
	assert.Equal(t, left.ResourceVersion, left.Object.ResourceVersion(), "at the new version")
	assert.Equal(t, fmt.Sprint(left.ResourceVersion), md(Decode(t, left.Object))["resourceVersion"])
	create(t, s, "default", "other", 1)
	ExpectNone(t, w, 50*time.Millisecond)
}

func testWatchNamespaceFilter(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	w, err := s.Watch(ctx, cache.WatchOptions{Namespace: "a", Resources: []cache.GroupResource{Applications}})
	require.NoError(t, err)
	defer w.Stop()
	create(t, s, "b", "x", 1)
	create(t, s, "a", "y", 1)
	assert.Equal(t, []string{"ADDED y"}, types(Collect(t, w, 1, wait)))
}

// testSlowWatcher: a watcher that never reads is closed with ErrTooSlow once its buffer is full,
// while a watcher that keeps up gets every event and the writer never waits for either.
func testSlowWatcher(t *testing.T, f Factory) {
	const buffer, batch, total = 64, 32, 320
	s := f.New(t, cache.Config{WatchBuffer: buffer})
	slow, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}})
	require.NoError(t, err)
	fast, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}})
	require.NoError(t, err)
	defer fast.Stop()
	for i := 0; i < total; i += batch {
		start := time.Now()
		for j := i; j < i+batch; j++ {
			_, err := s.Create(ctx, Key("default", fmt.Sprint("app-", j)), App("x", 1), cache.WriteOptions{})
			require.NoError(t, err)
		}
		require.Less(t, time.Since(start), wait, "a writer blocked")
		// The fast watcher keeps up: it takes this batch before the next one is written.
		for j, ev := range Collect(t, fast, batch, wait) {
			require.Equal(t, fmt.Sprint("app-", i+j), ev.Object.Key().Name)
		}
	}
	require.ErrorIs(t, Closed(t, slow, wait), cache.ErrTooSlow)
}

func testWatchStop(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	w, err := s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	w.Stop()
	w.Stop()
	require.NoError(t, Closed(t, w, wait))

	cctx, cancel := context.WithCancel(ctx)
	w, err = s.Watch(cctx, cache.WatchOptions{})
	require.NoError(t, err)
	cancel()
	require.ErrorIs(t, Closed(t, w, wait), context.Canceled)
}

func testStoreClose(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	w, err := s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)
	s.Close()
	s.Close()
	require.ErrorIs(t, Closed(t, w, wait), cache.ErrClosed)
	_, err = s.Create(ctx, Key("default", "x"), App("x", 1), cache.WriteOptions{})
	require.ErrorIs(t, err, cache.ErrClosed)
	_, err = s.Watch(ctx, cache.WatchOptions{})
	require.True(t, errors.Is(err, cache.ErrClosed))
	_, err = s.Restore(ctx, nil, cache.RestoreOptions{})
	require.ErrorIs(t, err, cache.ErrClosed)
}

func testProgress(t *testing.T, f Factory) {
	s := f.New(t, cache.Config{})
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Applications}})
	require.NoError(t, err)
	defer w.Stop()
	rv, ok := w.Progress()
	require.True(t, ok)
	assert.Equal(t, s.ResourceVersion(), rv)
	create(t, s, "default", "x", 1)
	_, ok = w.Progress()
	assert.False(t, ok, "not while an event waits")
	Collect(t, w, 1, wait)
	rv, ok = w.Progress()
	require.True(t, ok)
	assert.Equal(t, s.ResourceVersion(), rv)
}
