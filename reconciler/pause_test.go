package reconciler_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/reconciler"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// calls records the keys a reconciler was called with.
type calls struct {
	mu   sync.Mutex
	keys []string
	fn   func(n int) (reconciler.Result, error)
}

func (c *calls) Reconcile(_ context.Context, key cache.Key) (reconciler.Result, error) {
	c.mu.Lock()
	c.keys = append(c.keys, key.Name)
	n := len(c.keys)
	c.mu.Unlock()
	if c.fn != nil {
		return c.fn(n)
	}
	return reconciler.Result{}, nil
}

func (c *calls) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.keys...)
}

func create(t *testing.T, store *cache.Store, name string) {
	t.Helper()
	_, err := store.Create(ctx, cachetest.Key("default", name), cachetest.App(name, 1), cache.WriteOptions{})
	require.NoError(t, err)
}

// objects is the queue's keys by object name, with their state.
func objects(ctrl *reconciler.Controller) map[string]string {
	out := map[string]string{}
	for _, it := range ctrl.Queue() {
		out[it.Object] = it.State
	}
	return out
}

// TestPauseStepResume: a paused controller queues keys and reconciles none (its workers were
// already waiting for a key when it paused); each step reconciles exactly one key and leaves
// it paused; resume lets the rest through.
func TestPauseStepResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &calls{}
		store, ctrl, stop := runController(t, rec, nil)
		defer stop()
		synctest.Wait() // the workers wait in the queue's Get
		ctrl.Pause()
		assert.True(t, ctrl.Paused())
		create(t, store, "a")
		create(t, store, "b")
		require.True(t, ctrl.Enqueue(cachetest.Key("default", "c")))
		synctest.Wait()
		assert.Empty(t, rec.seen(), "paused: nothing reconciled")
		assert.Equal(t, map[string]string{"default/a": "due", "default/b": "due", "default/c": "due"}, objects(ctrl))

		out, err := ctrl.Step(ctx)
		require.NoError(t, err)
		synctest.Wait()
		require.Len(t, rec.seen(), 1, "one step, one reconcile")
		assert.Equal(t, "default/"+rec.seen()[0], out.Object)
		assert.Equal(t, "success", out.Result)
		assert.True(t, ctrl.Paused(), "paused again")
		assert.Len(t, objects(ctrl), 2)

		_, err = ctrl.Step(ctx)
		require.NoError(t, err)
		synctest.Wait()
		assert.Len(t, rec.seen(), 2)

		ctrl.Resume()
		synctest.Wait()
		assert.ElementsMatch(t, []string{"a", "b", "c"}, rec.seen())
		assert.Empty(t, ctrl.Queue())
		_, err = ctrl.Step(ctx)
		assert.ErrorIs(t, err, reconciler.ErrNothingDue)
		assert.True(t, ctrl.Paused(), "a step pauses a running controller")
	})
}

// TestQueueShowsDueTimesAndFailures: a failed key waits for its backoff with its failure count;
// a planned requeue waits without one; a step finds nothing due until the wait is over.
func TestQueueShowsDueTimesAndFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &calls{fn: func(n int) (reconciler.Result, error) {
			switch n {
			case 1, 2:
				return reconciler.Result{}, errors.New("boom")
			case 3:
				return reconciler.Result{RequeueAfter: 30 * time.Second}, nil
			}
			return reconciler.Result{}, nil
		}}
		store, ctrl, stop := runController(t, rec, func(c *reconciler.Config) {
			c.BackoffBase, c.BackoffMax = time.Second, time.Minute
		})
		defer stop()
		synctest.Wait()
		ctrl.Pause()
		start := time.Now()
		create(t, store, "a")
		synctest.Wait()

		out, err := ctrl.Step(ctx)
		require.NoError(t, err)
		assert.Equal(t, reconciler.Outcome{Controller: "applications", Key: cachetest.Key("default", "a"), Object: "default/a",
			Result: "error", Error: "boom", Duration: out.Duration, Calls: "applications#1"}, out)
		synctest.Wait()
		q := ctrl.Queue()
		require.Len(t, q, 1)
		assert.Equal(t, reconciler.QueueItem{Key: cachetest.Key("default", "a"), Object: "default/a", State: "waiting",
			Due: start.Add(time.Second), Failures: 1}, q[0])
		_, err = ctrl.Step(ctx)
		require.ErrorIs(t, err, reconciler.ErrNothingDue, "backing off")

		time.Sleep(time.Second)
		synctest.Wait()
		assert.Equal(t, "due", ctrl.Queue()[0].State)
		out, err = ctrl.Step(ctx)
		require.NoError(t, err)
		assert.Equal(t, "error", out.Result)
		synctest.Wait()
		assert.Equal(t, start.Add(3*time.Second), ctrl.Queue()[0].Due, "then 2 s")
		assert.Equal(t, 2, ctrl.Queue()[0].Failures)

		// The wait ends; the step runs before the work queue's goroutine has queued the key.
		time.Sleep(2 * time.Second)
		out, err = ctrl.Step(ctx)
		require.NoError(t, err)
		assert.Equal(t, "30s", out.RequeueAfter)
		synctest.Wait()
		q = ctrl.Queue()
		require.Len(t, q, 1)
		assert.Equal(t, "waiting", q[0].State)
		assert.WithinDuration(t, start.Add(33*time.Second), q[0].Due, 10*time.Millisecond)
		assert.Zero(t, q[0].Failures, "a planned requeue resets the failures")
		assert.Len(t, rec.seen(), 3)
	})
}

func TestStepWhenNotRunning(t *testing.T) {
	t.Parallel()
	ctrl, err := reconciler.New(reconciler.Config{Store: cache.New(cache.Config{}), Resource: cachetest.Applications, Reconciler: &calls{}})
	require.NoError(t, err)
	_, err = ctrl.Step(ctx)
	assert.ErrorIs(t, err, reconciler.ErrNotRunning)
	assert.Nil(t, ctrl.Queue())
	ctrl.Pause()
	assert.True(t, ctrl.Paused(), "the state is kept for when it runs")
}
