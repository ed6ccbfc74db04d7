package cache_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

var events = cache.GroupResource{Resource: "events"}

// sharedFeed is a watch cache fed as package etcd feeds it: one version per change, except the
// versions given to shared, which several changes get (one transaction at the source).
type sharedFeed struct {
	t  *testing.T
	c  *cache.WatchCache
	rv uint64
}

func newSharedFeed(t *testing.T, cfg cache.Config) *sharedFeed {
	cfg.StartResourceVersion = 10
	c := cache.NewWatchCache(cfg)
	t.Cleanup(c.Close)
	require.NoError(t, c.Replace(nil, 10))
	return &sharedFeed{t: t, c: c, rv: 10}
}

// write applies one change per name at one new version (shared when there are several) and
// returns that version. A name with the prefix "-" is removed.
func (f *sharedFeed) write(names ...string) uint64 {
	f.rv++
	var changes []cache.Change
	for _, n := range names {
		ch := cache.Change{ResourceVersion: f.rv}
		if n[0] == '-' {
			ch.Key = cache.Key{Resource: "events", Namespace: "default", Name: n[1:]}
		} else {
			ch.Key = cache.Key{Resource: "events", Namespace: "default", Name: n}
			o, err := f.c.Encode(ch.Key, map[string]any{"metadata": map[string]any{"name": n, "namespace": "default", "labels": map[string]any{"n": n}}})
			require.NoError(f.t, err)
			ch.Object, err = f.c.AtVersion(o, f.rv)
			require.NoError(f.t, err)
		}
		changes = append(changes, ch)
	}
	require.NoError(f.t, f.c.Apply(changes))
	return f.rv
}

// seen is one event as a watcher's client keeps it.
type seen struct {
	Type cache.EventType
	Name string
	RV   uint64
}

func (s seen) String() string { return fmt.Sprintf("%s %s@%d", s.Type, s.Name, s.RV) }

// take reads up to n events already in w's channel (all of them when n < 0), and whether the
// channel was closed.
func take(w *cache.Watcher, n int) (got []seen, closed bool) {
	for n < 0 || len(got) < n {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				return got, true
			}
			got = append(got, seen{ev.Type, ev.Object.Key().Name, ev.ResourceVersion})
		default:
			return got, false
		}
	}
	return got, false
}

// TestSharedVersionResume is the contract of a version several changes share
// (docs/DESIGN.md): a watcher cut off between two of them (its client went away, or it fell
// behind) and resumed at that version gets every change of it again, so none is lost; one
// resumed at a version whose changes it has all seen gets them again too (duplicates, allowed),
// except when it sees only one change at that version (then nothing is repeated, as in the
// memory store); a version some of whose changes were evicted from history cannot be resumed
// from (410: list again), as an evicted version cannot.
func TestSharedVersionResume(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	watch := func(c *cache.WatchCache, rv uint64, sel labels.Selector) *cache.Watcher {
		t.Helper()
		w, err := c.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{events}, ResourceVersion: rv, Label: sel})
		require.NoError(t, err)
		t.Cleanup(w.Stop)
		return w
	}

	t.Run("cut off by its client mid-version", func(t *testing.T) {
		f := newSharedFeed(t, cache.Config{})
		start := f.c.ResourceVersion()
		w := watch(f.c, start, nil)
		v := f.write("a", "b", "c", "d")
		after := f.write("e")
		first, _ := take(w, 2)
		require.Equal(t, []seen{{cache.Added, "a", v}, {cache.Added, "b", v}}, first)
		w.Stop()

		got, _ := take(watch(f.c, first[len(first)-1].RV, nil), -1)
		assert.Equal(t, []seen{{cache.Added, "a", v}, {cache.Added, "b", v}, {cache.Added, "c", v}, {cache.Added, "d", v}, {cache.Added, "e", after}}, got,
			"the whole version again, in the order of its transaction, then what followed")
	})

	t.Run("closed for falling behind mid-version", func(t *testing.T) {
		f := newSharedFeed(t, cache.Config{WatchBuffer: 20})
		w := watch(f.c, f.c.ResourceVersion(), nil)
		var names []string
		for i := range 40 {
			names = append(names, fmt.Sprintf("ev-%02d", i))
		}
		v := f.write(names...)
		var got []seen
		for ev := range w.Events() { // closed by the store; a stuck pump fails the test's timeout
			got = append(got, seen{ev.Type, ev.Object.Key().Name, ev.ResourceVersion})
		}
		require.ErrorIs(t, w.Err(), cache.ErrTooSlow)
		require.NotEmpty(t, got, "it took some of the version before it was closed")
		require.Less(t, len(got), len(names), "it was closed in the middle of the version")

		rest, _ := take(watch(f.c, got[len(got)-1].RV, nil), -1)
		have := map[string]bool{}
		for _, s := range append(got, rest...) {
			assert.Equal(t, v, s.RV)
			have[s.Name] = true
		}
		assert.Len(t, have, len(names), "every change of the version, across the two watches")
	})

	t.Run("deletions of one version (a lease's expiry)", func(t *testing.T) {
		f := newSharedFeed(t, cache.Config{})
		f.write("a")
		f.write("b")
		mark := f.write("c")
		w := watch(f.c, mark, nil)
		v := f.write("-a", "-b", "-c")
		first, _ := take(w, 1)
		require.Equal(t, []seen{{cache.Deleted, "a", v}}, first)
		w.Stop()
		got, _ := take(watch(f.c, v, nil), -1)
		assert.Equal(t, []seen{{cache.Deleted, "a", v}, {cache.Deleted, "b", v}, {cache.Deleted, "c", v}}, got)
	})

	t.Run("one change per version: nothing repeated", func(t *testing.T) {
		f := newSharedFeed(t, cache.Config{})
		v1 := f.write("a")
		v2 := f.write("b")
		got, _ := take(watch(f.c, v1, nil), -1)
		assert.Equal(t, []seen{{cache.Added, "b", v2}}, got)
		got, _ = take(watch(f.c, v2, nil), -1)
		assert.Empty(t, got)
	})

	t.Run("one change of the version in the watcher's selection: nothing repeated", func(t *testing.T) {
		f := newSharedFeed(t, cache.Config{})
		v := f.write("a", "b", "c")
		only := labels.SelectorFromSet(labels.Set{"n": "b"})
		got, _ := take(watch(f.c, v, only), -1)
		assert.Empty(t, got)
		got, _ = take(watch(f.c, v, labels.Everything()), -1)
		assert.Len(t, got, 3, "without a selector the three come again")
	})

	t.Run("a version partly evicted cannot be resumed from", func(t *testing.T) {
		f := newSharedFeed(t, cache.Config{WatchHistory: 3})
		before := f.write("a")
		v := f.write("b", "c", "d", "e") // b is evicted by e
		for _, rv := range []uint64{before, v} {
			_, err := f.c.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{events}, ResourceVersion: rv})
			require.Error(t, err, "resume at %d", rv)
			assert.True(t, errors.Is(err, cache.ErrGone), "resume at %d: %v", rv, err)
		}
		res, err := f.c.List(ctx, events)
		require.NoError(t, err)
		assert.Len(t, res.Items, 5, "lists are not affected")
		after := f.write("f")
		got, _ := take(watch(f.c, after, nil), -1)
		assert.Empty(t, got, "later versions resume as ever")
	})

	t.Run("a version wholly evicted cannot be resumed from either", func(t *testing.T) {
		f := newSharedFeed(t, cache.Config{WatchHistory: 2})
		v := f.write("a", "b")
		f.write("c")
		f.write("d") // a and b are evicted
		_, err := f.c.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{events}, ResourceVersion: v})
		assert.ErrorIs(t, err, cache.ErrGone)
	})
}
