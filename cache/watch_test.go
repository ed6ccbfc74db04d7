package cache_test

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/labels"
)

const wait = 5 * time.Second

// gatedSelector is a label selector whose Matches blocks until its gate opens: a stand-in for
// a selector that is costly to evaluate.
type gatedSelector struct {
	labels.Selector
	gate    chan struct{}
	open    sync.Once
	entered atomic.Int32
}

// newGatedSelector returns a closed gate that the test opens, at the latest when it ends.
func newGatedSelector(t *testing.T) *gatedSelector {
	g := &gatedSelector{Selector: labels.Everything(), gate: make(chan struct{})}
	t.Cleanup(g.Open)
	return g
}

func (g *gatedSelector) Open() { g.open.Do(func() { close(g.gate) }) }

func (g *gatedSelector) Empty() bool { return false }

func (g *gatedSelector) Matches(labels.Labels) bool {
	g.entered.Add(1)
	<-g.gate
	return true
}

// returnsWithin runs fn and fails the test if it does not return within d.
func returnsWithin(t *testing.T, d time.Duration, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// TestSelectorsRunOutsideTheLock: while a watcher's selector is stuck evaluating, writers,
// readers and other watchers go on; the stuck watcher then gets its events in order.
func TestSelectorsRunOutsideTheLock(t *testing.T) {
	t.Parallel()
	s := cache.New(cache.Config{})
	defer s.Close()
	ctx := context.Background()
	gated, listGate, initGate := newGatedSelector(t), newGatedSelector(t), newGatedSelector(t)
	slow, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}, Label: gated})
	require.NoError(t, err)
	defer slow.Stop()
	plain, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}})
	require.NoError(t, err)
	defer plain.Stop()
	// Deferred after the Stops, so it runs before them: a failing test must not leave a pump
	// (or, before selectors left the lock, a writer) stuck in a selector.
	defer func() { gated.Open(); listGate.Open(); initGate.Open() }()

	returnsWithin(t, wait, "writes while a selector is stuck", func() {
		for i := range 5 {
			_, err := s.Create(ctx, cachetest.Key("default", fmt.Sprint("app-", i)), cachetest.App("x", 1), cache.WriteOptions{})
			require.NoError(t, err)
		}
	})
	require.Eventually(t, func() bool { return gated.entered.Load() > 0 }, wait, time.Millisecond, "the selector is being evaluated")
	assert.Len(t, cachetest.Collect(t, plain, 5, wait), 5, "other watchers are served")
	returnsWithin(t, wait, "a list while a selector is stuck", func() {
		res, err := s.List(ctx, cachetest.Applications)
		require.NoError(t, err)
		assert.Len(t, res.Items, 5)
	})

	// A list and a watch with initial events, each stuck in their own selector, hold no lock.
	listed := make(chan int, 1)
	go func() {
		res, _ := s.List(ctx, cachetest.Applications, cache.MatchingLabels(listGate))
		listed <- len(res.Items)
	}()
	initial := make(chan *cache.Watcher, 1)
	go func() {
		w, _ := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}, Label: initGate, SendInitialEvents: true})
		initial <- w
	}()
	require.Eventually(t, func() bool { return listGate.entered.Load() > 0 && initGate.entered.Load() > 0 }, wait, time.Millisecond)
	returnsWithin(t, wait, "a write while a list and a watch evaluate selectors", func() {
		_, err := s.Create(ctx, cachetest.Key("default", "app-5"), cachetest.App("x", 1), cache.WriteOptions{})
		require.NoError(t, err)
	})

	gated.Open()
	listGate.Open()
	initGate.Open()
	evs := cachetest.Collect(t, slow, 6, wait)
	for i, ev := range evs {
		assert.Equal(t, fmt.Sprint("app-", i), ev.Object.Key().Name, "in order, each once")
	}
	assert.Equal(t, 5, <-listed)
	w := <-initial
	defer w.Stop()
	evs = cachetest.Collect(t, w, 6, wait)
	assert.Equal(t, cache.Bookmark, evs[5].Type, "the snapshot taken before app-5, then its bookmark")
	assert.Equal(t, "app-5", cachetest.Collect(t, w, 1, wait)[0].Object.Key().Name, "then the write made while it was filtered")
}

// TestIdleWatchersAreSmall: a watcher that has nothing to deliver holds no buffer of
// Config.WatchBuffer events; its memory is measured with the live heap after GC.
func TestIdleWatchersAreSmall(t *testing.T) {
	const n = 2000
	s := cache.New(cache.Config{})
	defer s.Close()
	ctx := context.Background()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	ws := make([]*cache.Watcher, n)
	for i := range ws {
		w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}})
		require.NoError(t, err)
		ws[i] = w
	}
	per := (int64(heap()) - int64(before)) / n
	t.Logf("%d idle watchers: %d bytes each (Config.WatchBuffer is %d events of %d bytes)", n, per, 1024, 40)
	assert.Less(t, per, int64(4<<10), "an idle watcher costs a few hundred bytes, not its 40 KB buffer")
	for _, w := range ws {
		w.Stop()
	}
}

// TestQueuedEventsArriveInOrder: a watcher that reads late gets a burst larger than its
// channel (queued, then pumped) in order, each event once, and its pump is gone after Stop.
func TestQueuedEventsArriveInOrder(t *testing.T) {
	t.Parallel()
	s := cache.New(cache.Config{WatchBuffer: 500})
	defer s.Close()
	ctx := context.Background()
	sel, err := labels.Parse("tier=web")
	require.NoError(t, err)
	plain, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}})
	require.NoError(t, err)
	selective, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}, Label: sel})
	require.NoError(t, err)
	goroutines := runtime.NumGoroutine()
	for i := range 300 {
		obj := cachetest.App("x", 1)
		if i%2 == 0 {
			obj["metadata"].(map[string]any)["labels"] = map[string]any{"tier": "web"}
		}
		_, err := s.Create(ctx, cachetest.Key("default", fmt.Sprintf("app-%03d", i)), obj, cache.WriteOptions{})
		require.NoError(t, err)
	}
	for i, ev := range cachetest.Collect(t, plain, 300, wait) {
		require.Equal(t, fmt.Sprintf("app-%03d", i), ev.Object.Key().Name)
	}
	for i, ev := range cachetest.Collect(t, selective, 150, wait) {
		require.Equal(t, fmt.Sprintf("app-%03d", 2*i), ev.Object.Key().Name)
	}
	cachetest.ExpectNone(t, selective, 20*time.Millisecond)
	_, ok := plain.Progress()
	assert.True(t, ok, "drained")
	plain.Stop()
	selective.Stop()
	assert.LessOrEqual(t, runtime.NumGoroutine(), goroutines, "no pump outlives its watcher")
}

// TestHistoryBoundedInBytes: create and delete cycles of large objects keep the history within
// Config.WatchHistoryBytes; resuming from an evicted version is ErrGone, from a kept one works;
// a resource with small events keeps its history while the large one pays for its churn.
func TestHistoryBoundedInBytes(t *testing.T) {
	t.Parallel()
	const budget = 4 << 20
	s := cache.New(cache.Config{WatchHistoryBytes: budget})
	defer s.Close()
	ctx := context.Background()
	events := cache.GroupResource{Resource: "events"}
	small := func(i int) uint64 {
		o, err := s.Create(ctx, cache.Key{Resource: "events", Namespace: "default", Name: fmt.Sprint("e", i)},
			map[string]any{"apiVersion": "v1", "kind": "Event"}, cache.WriteOptions{})
		require.NoError(t, err)
		return o.ResourceVersion()
	}
	firstEvent := small(0)
	big := strings.Repeat("x", 256<<10)
	var first uint64
	for i := range 100 {
		obj := cachetest.App("x", 1)
		obj["spec"].(map[string]any)["config"] = map[string]any{"blob": big}
		o, err := s.Create(ctx, cachetest.Key("default", "big"), obj, cache.WriteOptions{})
		require.NoError(t, err)
		if i == 0 {
			first = o.ResourceVersion()
		}
		_, err = s.Delete(ctx, cachetest.Key("default", "big"), cache.Preconditions{}, cache.WriteOptions{})
		require.NoError(t, err)
		small(i + 1)
	}
	_, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}, ResourceVersion: first})
	require.ErrorIs(t, err, cache.ErrGone, "the first cycles were evicted by size")
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}, ResourceVersion: s.ResourceVersion() - 3})
	require.NoError(t, err, "the last cycle is kept")
	evs := cachetest.Collect(t, w, 2, wait)
	assert.Equal(t, []cache.EventType{cache.Added, cache.Deleted}, []cache.EventType{evs[0].Type, evs[1].Type})
	w.Stop()
	w, err = s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{events}, ResourceVersion: firstEvent})
	require.NoError(t, err, "the small resource kept its history")
	assert.Len(t, cachetest.Collect(t, w, 100, wait), 100)
	w.Stop()
}
