package events

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
	clocktesting "k8s.io/utils/clock/testing"
)

// creates is a Client that accepts every new Event and nothing else: what the recorder's index
// holds does not depend on a store.
type creates struct{ n int }

func (c *creates) Get(context.Context, cache.Key) (*cache.Object, error) {
	return nil, cache.ErrNotFound
}
func (c *creates) List(context.Context, cache.GroupResource, ...cache.ListOption) (cache.ListResult, error) {
	return cache.ListResult{}, nil
}
func (c *creates) Update(context.Context, cache.Key, map[string]any) (*cache.Object, error) {
	return nil, cache.ErrNotFound
}
func (c *creates) CreateEvent(context.Context, Stored) (*cache.Object, error) { c.n++; return nil, nil }
func (c *creates) Expire(context.Context, cache.Key) error                    { return nil }

// TestIndexKeepsOnlyTheWindow: the recorder remembers only the Events it may still aggregate
// into, those of the last Window, and of those at most indexSize (the most recently recorded),
// however many it records: its memory does not follow the store's (etcd has no limit).
func TestIndexKeepsOnlyTheWindow(t *testing.T) {
	t.Parallel()
	c := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	client := &creates{}
	r := New(Config{Client: client, Clock: c})
	for i := range 5000 {
		c.Step(100 * time.Millisecond)
		r.Record(context.Background(), Event{Object: Ref{Kind: "Pod", Namespace: "default", Name: fmt.Sprint("p-", i)}, Reason: "Created"})
	}
	assert.Equal(t, 5000, client.n)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Len(t, r.index, 600, "the last 60 s at ten Events a second")
	assert.Equal(t, 600, r.order.Len())
}

// TestIndexKeepsAtMostIndexSize: however many Events arrive within a Window, the index keeps
// the indexSize most recently recorded.
func TestIndexKeepsAtMostIndexSize(t *testing.T) {
	t.Parallel()
	c := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	client := &creates{}
	r := New(Config{Client: client, Clock: c})
	for i := range 2 * indexSize {
		r.Record(context.Background(), Event{Object: Ref{Kind: "Pod", Namespace: "default", Name: fmt.Sprint("p-", i)}, Reason: "Created"})
	}
	assert.Equal(t, 2*indexSize, client.n)
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.Len(t, r.index, indexSize)
	assert.Equal(t, indexSize, r.order.Len())
	agg := func(i int) aggKey {
		return aggKey{kind: "Pod", namespace: "default", name: fmt.Sprint("p-", i), typ: TypeNormal, reason: "Created"}
	}
	assert.Contains(t, r.index, agg(2*indexSize-1), "the newest is kept")
	assert.Contains(t, r.index, agg(indexSize), "the oldest kept")
	assert.NotContains(t, r.index, agg(indexSize-1))
}
