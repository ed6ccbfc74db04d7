package events_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// The Event kind's limit (EVENT_LIMIT over the in-memory store), through the write path that
// asks it for room: every Event stored counts, whoever writes it.

type limitEnv struct {
	env    *registrytest.Env
	client *registry.Client // a client's writes (the limit does not tell them from opemu's)
	rec    *events.Recorder
	clock  *clocktesting.FakeClock
}

func newLimitEnv(t testing.TB, limit int) limitEnv {
	t.Helper()
	env := registrytest.New(t, registrytest.Options{EventLimit: limit})
	c := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	rec := events.New(events.Config{Client: env.Registry.Client("opemu-events"), Host: "pod-1", Clock: c})
	return limitEnv{env: env, client: env.Registry.Client("kubectl"), rec: rec, clock: c}
}

func (e limitEnv) key(name string) cache.Key {
	return cache.Key{Resource: "events", Namespace: "default", Name: name}
}

// create creates the client Event name, last seen at last.
func (e limitEnv) create(t testing.TB, name string, last time.Time) {
	t.Helper()
	_, err := e.client.Create(context.Background(), e.key(name), clientEvent(name, last))
	require.NoError(t, err)
}

func clientEvent(name string, last time.Time) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": name},
		"involvedObject": map[string]any{"kind": "Pod", "name": "p"}, "reason": "Client", "lastTimestamp": last.UTC().Format(time.RFC3339)}
}

// stored returns the names of the Events stored.
func (e limitEnv) stored(t testing.TB) []string {
	t.Helper()
	res, err := e.env.Storage.List(context.Background(), events.Resource)
	require.NoError(t, err)
	var out []string
	for _, o := range res.Items {
		out = append(out, o.Key().Name)
	}
	return out
}

// TestLimitCountsEveryEvent: the recorder's Events, a client's and those written through
// events.k8s.io/v1 count against one limit; room is made before each, the oldest lastTimestamp
// going first; an Event written again takes its new place; removed Events free their room.
func TestLimitCountsEveryEvent(t *testing.T) {
	t.Parallel()
	const limit = 10
	e := newLimitEnv(t, limit)
	for i := range 5 {
		e.clock.Step(time.Second)
		e.rec.Record(context.Background(), ev(fmt.Sprint("own-", i), "Created"))
	}
	for i := range 30 {
		e.clock.Step(time.Second)
		e.create(t, fmt.Sprint("client-", i), e.clock.Now())
		require.LessOrEqual(t, len(e.stored(t)), limit, "never more than the limit")
	}
	assert.Len(t, e.stored(t), limit)
	assert.Contains(t, e.stored(t), "client-29")
	assert.Contains(t, e.stored(t), "client-20")
	assert.NotContains(t, e.stored(t), "client-19")

	// A client Event claiming an old lastTimestamp is the oldest: it goes first, at the next
	// create (its own never removes it).
	e.create(t, "ancient", e.clock.Now().Add(-time.Hour))
	assert.Contains(t, e.stored(t), "ancient")
	e.clock.Step(time.Second)
	e.rec.Record(context.Background(), ev("own-new", "Created"))
	assert.NotContains(t, e.stored(t), "ancient")
	assert.Contains(t, e.stored(t), "client-29")

	// An Event written again with a new lastTimestamp is no longer the oldest.
	oldest := "client-21"
	obj := clientEvent(oldest, e.clock.Now().Add(time.Minute))
	_, err := e.client.Update(context.Background(), e.key(oldest), obj)
	require.NoError(t, err)
	e.create(t, "after-update", e.clock.Now())
	assert.Contains(t, e.stored(t), oldest, "updated to the newest")
	assert.NotContains(t, e.stored(t), "client-22", "the oldest now")

	// Through events.k8s.io/v1: the same v1 Events, counted the same.
	view, ok := e.env.Kinds.Lookup("events.k8s.io", "v1", "events")
	require.True(t, ok)
	_, err = e.env.Registry.Create(context.Background(), registry.Target{Kind: view, Key: cache.Key{Resource: "events", Namespace: "default"}}, // stored as v1
		map[string]any{"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": map[string]any{"name": "through-the-view"},
			"eventTime": e.clock.Now().UTC().Format("2006-01-02T15:04:05.000000Z07:00"), "reportingController": "c", "reportingInstance": "i",
			"action": "Act", "reason": "Viewed", "regarding": map[string]any{"kind": "Pod", "name": "p"}, "type": "Normal"}, registry.Options{})
	require.NoError(t, err)
	assert.Len(t, e.stored(t), limit)
	assert.Contains(t, e.stored(t), "through-the-view")
	assert.NotContains(t, e.stored(t), "client-23")

	st, err := e.rec.Stats(context.Background())
	require.NoError(t, err)
	assert.Equal(t, limit, st.Total, "/events/stats counts what is stored")

	// Events removed free their room: the next creates remove nothing.
	for _, name := range e.stored(t)[:3] {
		_, _, err := e.client.Delete(context.Background(), e.key(name), cache.Preconditions{})
		require.NoError(t, err)
	}
	for i := range 3 {
		e.create(t, fmt.Sprint("after-deletes-", i), e.clock.Now())
	}
	assert.Len(t, e.stored(t), limit)
	assert.Contains(t, e.stored(t), "client-25", "nothing else went")
}

// TestLimitFreesTheRoomOfFailedCreates: a create that fails (the name is taken, the namespace
// is Terminating) takes no room: afterwards the limit still keeps limit Events.
func TestLimitFreesTheRoomOfFailedCreates(t *testing.T) {
	t.Parallel()
	const limit = 5
	e := newLimitEnv(t, limit)
	e.create(t, "taken", e.clock.Now())
	for range 20 {
		_, err := e.client.Create(context.Background(), e.key("taken"), clientEvent("taken", e.clock.Now()))
		require.ErrorIs(t, err, cache.ErrAlreadyExists)
	}
	for i := range limit - 1 {
		e.create(t, fmt.Sprint("e-", i), e.clock.Now())
	}
	assert.Len(t, e.stored(t), limit, "the failed creates left their room")
	assert.Contains(t, e.stored(t), "taken")
}

// TestLimitHoldsWhileWritersRace: with writers creating Events at once, no version of the store
// ever holds more than the limit (counted from a watch, which sees every change in order).
func TestLimitHoldsWhileWritersRace(t *testing.T) {
	t.Parallel()
	const limit, writers, each = 10, 8, 60
	e := newLimitEnv(t, limit)
	w, err := e.env.Storage.Watch(context.Background(), cache.WatchOptions{Resources: []cache.GroupResource{events.Resource}})
	require.NoError(t, err)
	defer w.Stop()
	most := make(chan int, 1)
	go func() { // counts the Events stored at each version until every create has been seen
		live, peak, created := 0, 0, 0
		for created < writers*each {
			ev, ok := <-w.Events()
			if !ok {
				break
			}
			switch ev.Type {
			case cache.Added:
				live++
				created++
			case cache.Deleted:
				live--
			}
			peak = max(peak, live)
		}
		most <- peak
	}()

	var wg sync.WaitGroup
	for n := range writers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprint("w-", n, "-", i)
				_, err := e.client.Create(context.Background(), e.key(name), clientEvent(name, e.clock.Now().Add(time.Duration(i)*time.Second)))
				assert.NoError(t, err)
			}
		})
	}
	wg.Wait()
	assert.Len(t, e.stored(t), limit)
	select {
	case peak := <-most:
		require.NoError(t, w.Err(), "the watch saw every change")
		assert.LessOrEqual(t, peak, limit, "the most Events stored at any version")
	case <-time.After(10 * time.Second):
		t.Fatal("the watch did not see every create within 10 s")
	}
}

// TestLimitOrdersAnyTime: a client's lastTimestamp far in the past or the future (beyond what
// Unix nanoseconds hold) takes its place at that end of the order.
func TestLimitOrdersAnyTime(t *testing.T) {
	t.Parallel()
	e := newLimitEnv(t, 3)
	e.create(t, "year-1", time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC))
	e.create(t, "year-9999", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC))
	e.create(t, "now-1", e.clock.Now())
	e.create(t, "now-2", e.clock.Now())
	assert.ElementsMatch(t, []string{"year-9999", "now-1", "now-2"}, e.stored(t))
	e.create(t, "now-3", e.clock.Now())
	assert.ElementsMatch(t, []string{"year-9999", "now-2", "now-3"}, e.stored(t))
}
