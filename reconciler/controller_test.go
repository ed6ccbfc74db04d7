package reconciler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/reconciler"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// runController runs a controller with rec over a fresh store inside the bubble.
var ctx = context.Background()

func runController(t *testing.T, rec reconciler.Reconciler, tweak func(*reconciler.Config)) (*cache.Store, *reconciler.Controller, func()) {
	t.Helper()
	store := cache.New(cache.Config{})
	cfg := reconciler.Config{Store: store, Resource: cachetest.Applications, Reconciler: rec, Tuning: reconciler.Tuning{Workers: 4}}
	if tweak != nil {
		tweak(&cfg)
	}
	ctrl, err := reconciler.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = ctrl.Run(ctx); close(done) }()
	return store, ctrl, func() { cancel(); <-done; store.Close() }
}

func TestOneWorkerPerKeyAndDirtyKeysRunAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var running, overlaps, calls atomic.Int32
		release := make(chan struct{})
		rec := reconciler.Func(func(ctx context.Context, key cache.Key) (reconciler.Result, error) {
			if running.Add(1) > 1 {
				overlaps.Add(1)
			}
			defer running.Add(-1)
			if calls.Add(1) == 1 {
				<-release // hold the first pass while the key is enqueued again and again
			}
			return reconciler.Result{}, nil
		})
		store, ctrl, stop := runController(t, rec, nil)
		defer stop()
		_, err := store.Create(ctx, cachetest.Key("default", "a"), cachetest.App("a", 1), cache.WriteOptions{})
		require.NoError(t, err)
		synctest.Wait()
		require.Equal(t, int32(1), calls.Load())
		for range 50 {
			require.True(t, ctrl.Enqueue(cachetest.Key("default", "a")))
		}
		synctest.Wait()
		assert.Equal(t, int32(1), calls.Load(), "no second worker takes the key while it is processed")
		close(release)
		synctest.Wait()
		assert.Equal(t, int32(2), calls.Load(), "50 adds while processing: processed exactly once more")
		assert.Zero(t, overlaps.Load())
	})
}

// TestConflictsAreNotFailures: a 409 requeues at once without counting as a failure (SPEC §8),
// whichever layer answered it: the store (a resourceVersion that moved on) or the write path (a
// uid precondition, registry/update.go), wrapped or not.
func TestConflictsAreNotFailures(t *testing.T) {
	gr := schema.GroupResource{Group: cachetest.Applications.Group, Resource: cachetest.Applications.Resource}
	for _, tc := range []struct {
		name     string
		conflict func(key cache.Key) error
	}{
		{"store", func(key cache.Key) error { return &cache.Error{Err: cache.ErrConflict, Key: key} }},
		{"uid precondition", func(key cache.Key) error {
			return apierrors.NewConflict(gr, key.Name, errors.New("Precondition failed: UID in precondition: a, UID in object meta: b"))
		}},
		{"wrapped", func(key cache.Key) error {
			return fmt.Errorf("update status: %w", apierrors.NewConflict(gr, key.Name, errors.New("the object has been modified")))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var calls atomic.Int32
				rec := reconciler.Func(func(ctx context.Context, key cache.Key) (reconciler.Result, error) {
					if calls.Add(1) <= 10 {
						return reconciler.Result{}, tc.conflict(key)
					}
					return reconciler.Result{}, nil
				})
				dropped := &dropRecorder{Reconciler: rec}
				reg := metrics.New()
				store, _, stop := runController(t, dropped, func(c *reconciler.Config) { c.MaxRetries, c.Metrics = 2, reg })
				defer stop()
				start := time.Now()
				_, err := store.Create(ctx, cachetest.Key("default", "a"), cachetest.App("a", 1), cache.WriteOptions{})
				require.NoError(t, err)
				synctest.Wait()
				assert.Equal(t, int32(11), calls.Load(), "ten conflicts retried at once (no backoff), then success")
				assert.Equal(t, start, time.Now(), "no time passed")
				assert.Zero(t, dropped.n.Load(), "conflicts never count toward MaxRetries")
				assert.Equal(t, 10.0, sample(t, reg, "controller_reconcile_total", "result", "conflict"))
				assert.Zero(t, sample(t, reg, "controller_reconcile_errors_total", "", ""), "a conflict is not a reconcile error")
				assert.Zero(t, sample(t, reg, "workqueue_retries_total", "", ""), "nor a rate-limited retry")
			})
		})
	}
}

// sample sums the samples of the counter name in reg whose label is value ("" for every sample).
func sample(t *testing.T, reg *metrics.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gatherer().Gather()
	require.NoError(t, err)
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			match := label == ""
			for _, lp := range m.GetLabel() {
				match = match || (lp.GetName() == label && lp.GetValue() == value)
			}
			if match {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

type dropRecorder struct {
	reconciler.Reconciler
	n atomic.Int32
}

func (d *dropRecorder) Dropped(context.Context, cache.Key, error) { d.n.Add(1) }

func TestFailuresBackOffThenDrop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at []time.Time
		start := time.Now()
		rec := reconciler.Func(func(ctx context.Context, key cache.Key) (reconciler.Result, error) {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
			return reconciler.Result{}, errors.New("boom")
		})
		dropped := &dropRecorder{Reconciler: rec}
		store, _, stop := runController(t, dropped, func(c *reconciler.Config) {
			c.MaxRetries, c.BackoffBase, c.BackoffMax = 3, 100*time.Millisecond, 250*time.Millisecond
		})
		defer stop()
		_, err := store.Create(ctx, cachetest.Key("default", "a"), cachetest.App("a", 1), cache.WriteOptions{})
		require.NoError(t, err)
		time.Sleep(time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		require.Len(t, at, 4, "the first attempt and MaxRetries retries")
		var offsets []time.Duration
		for _, a := range at {
			offsets = append(offsets, a.Sub(start))
		}
		assert.Equal(t, []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 550 * time.Millisecond}, offsets, "100, 200, then capped at 250 ms")
		assert.Equal(t, int32(1), dropped.n.Load())
	})
}

func TestPlannedRequeueAndResync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		rec := reconciler.Func(func(ctx context.Context, key cache.Key) (reconciler.Result, error) {
			if calls.Add(1) == 1 {
				return reconciler.Result{RequeueAfter: 5 * time.Second}, nil
			}
			return reconciler.Result{}, nil
		})
		store, _, stop := runController(t, rec, func(c *reconciler.Config) { c.ResyncInterval = time.Minute })
		defer stop()
		_, err := store.Create(ctx, cachetest.Key("default", "a"), cachetest.App("a", 1), cache.WriteOptions{})
		require.NoError(t, err)
		time.Sleep(4 * time.Second)
		synctest.Wait()
		assert.Equal(t, int32(1), calls.Load())
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Equal(t, int32(2), calls.Load(), "requeued after 5 s")
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, int32(3), calls.Load(), "and by the resync")
	})
}

func TestEnqueueWhenNotRunning(t *testing.T) {
	t.Parallel()
	ctrl, err := reconciler.New(reconciler.Config{Store: cache.New(cache.Config{}), Resource: cachetest.Applications,
		Reconciler: reconciler.Func(func(context.Context, cache.Key) (reconciler.Result, error) { return reconciler.Result{}, nil })})
	require.NoError(t, err)
	assert.False(t, ctrl.Enqueue(cachetest.Key("default", "a")))
	assert.False(t, ctrl.Running())
	_, err = reconciler.New(reconciler.Config{})
	require.Error(t, err)
}

// TestResyncDoesNotCutBackoffShort: a key waiting out a failure's backoff is left alone by the
// resync, so three failures are retried exactly 1, 2 and 4 s apart however often the resync
// comes (SPEC §8: the history shows the backoff).
func TestResyncDoesNotCutBackoffShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var at []time.Time
		start := time.Now()
		rec := reconciler.Func(func(ctx context.Context, key cache.Key) (reconciler.Result, error) {
			mu.Lock()
			defer mu.Unlock()
			at = append(at, time.Now())
			if len(at) <= 3 {
				return reconciler.Result{}, errors.New("boom")
			}
			return reconciler.Result{}, nil
		})
		store, _, stop := runController(t, rec, func(c *reconciler.Config) { c.ResyncInterval = 300 * time.Millisecond })
		defer stop()
		_, err := store.Create(ctx, cachetest.Key("default", "a"), cachetest.App("a", 1), cache.WriteOptions{})
		require.NoError(t, err)
		time.Sleep(7*time.Second + 100*time.Millisecond)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		var offsets []time.Duration
		for _, a := range at {
			offsets = append(offsets, a.Sub(start))
		}
		require.GreaterOrEqual(t, len(offsets), 4, "%v", offsets)
		assert.Equal(t, []time.Duration{0, time.Second, 3 * time.Second, 7 * time.Second}, offsets[:4], "retries 1, 2 and 4 s apart")
		for _, o := range offsets[4:] {
			assert.Greater(t, o, 7*time.Second, "after the success, only resyncs: %v", offsets)
		}
	})
}

// TestDroppedKeyWaitsForAChange: once a key is dropped after MaxRetries, neither the resync nor
// a re-list queues it again; a change that matters (here a label) does, and so does Enqueue.
func TestDroppedKeyWaitsForAChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		rec := reconciler.Func(func(ctx context.Context, key cache.Key) (reconciler.Result, error) {
			calls.Add(1)
			return reconciler.Result{}, errors.New("always")
		})
		dropped := &dropRecorder{Reconciler: rec}
		store, ctrl, stop := runController(t, dropped, func(c *reconciler.Config) {
			c.MaxRetries, c.ResyncInterval = 2, 10*time.Second
		})
		defer stop()
		key := cachetest.Key("default", "a")
		_, err := store.Create(ctx, key, cachetest.App("a", 1), cache.WriteOptions{})
		require.NoError(t, err)
		time.Sleep(10 * time.Minute) // sixty resyncs
		synctest.Wait()
		assert.Equal(t, int32(3), calls.Load(), "the first attempt and two retries, then nothing")
		assert.Equal(t, int32(1), dropped.n.Load())
		assert.Equal(t, []string{"default/a"}, ctrl.Dropped())
		assert.Empty(t, ctrl.Queue())

		// A status-only write (what the reconciler's Failed phase is) changes nothing.
		modify(t, store, key, func(obj map[string]any) { obj["status"] = map[string]any{"phase": "Failed"} })
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, int32(3), calls.Load(), "a status write does not bring it back")

		// A label does: a fresh round of retries.
		modify(t, store, key, func(obj map[string]any) { obj["metadata"].(map[string]any)["labels"] = map[string]any{"try": "again"} })
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, int32(6), calls.Load(), "a change that matters: three more attempts")
		assert.Equal(t, int32(2), dropped.n.Load())

		// And so does asking for it.
		require.True(t, ctrl.Enqueue(key))
		assert.Empty(t, ctrl.Dropped())
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, int32(9), calls.Load(), "Enqueue: three more attempts")
		assert.Equal(t, []string{"default/a"}, ctrl.Dropped())
	})
}

// modify writes fn's change to the object at key, as a client would.
func modify(t *testing.T, store *cache.Store, key cache.Key, fn func(obj map[string]any)) {
	t.Helper()
	_, err := store.GuaranteedUpdate(ctx, key, cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
		obj := cachetest.Decode(t, cur)
		fn(obj)
		return cache.Update{Object: obj}, nil
	}, cache.WriteOptions{})
	require.NoError(t, err)
}
