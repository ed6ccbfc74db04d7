package etcd

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

var batchPrefixes atomic.Int64

// TestGroupCommit queues concurrent TTL creates behind a batch held in flight, then lets them
// go as the next batch: without a conflict they are one transaction (one revision for all,
// each caller answered with its own object); with a key that exists they are made one by one,
// the existing key's caller gets AlreadyExists and the others their objects. A watcher sees
// every create once, in the order of the answers' versions.
func TestGroupCommit(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	ctx := t.Context()
	events := cache.GroupResource{Resource: "events"}
	key := func(name string) cache.Key { return cache.Key{Resource: "events", Namespace: "default", Name: name} }
	event := func(name string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": name, "namespace": "default"}, "reason": "Created"}
	}
	ttl := cache.WriteOptions{TTL: time.Hour}

	for _, tc := range []struct {
		name     string
		existing string // a key created before the batch, also in it
	}{
		{name: "one transaction"},
		{name: "a conflict: one by one", existing: "ev-3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := New(Config{Client: client, Prefix: fmt.Sprintf("/batch-%d", batchPrefixes.Add(1))})
			require.NoError(t, err)
			t.Cleanup(s.Close)
			if tc.existing != "" {
				_, err := s.Create(ctx, key(tc.existing), event(tc.existing), ttl)
				require.NoError(t, err)
			}
			w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{events}, ResourceVersion: s.ResourceVersion()})
			require.NoError(t, err)
			defer w.Stop()

			// Hold a batch in flight: the creates below queue up behind it.
			s.batch.mu.Lock()
			s.batch.inFlight = true
			s.batch.mu.Unlock()
			const n = 6
			type answer struct {
				obj *cache.Object
				err error
			}
			answers := make([]answer, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() {
					name := fmt.Sprintf("ev-%d", i)
					o, err := s.Create(ctx, key(name), event(name), ttl)
					answers[i] = answer{o, err}
				})
			}
			require.Eventually(t, func() bool {
				s.batch.mu.Lock()
				defer s.batch.mu.Unlock()
				return len(s.batch.queue) == n
			}, 10*time.Second, time.Millisecond, "every create queued behind the batch in flight")
			// The batch in flight ends: the queue goes as the next batch, led by its first.
			s.batch.mu.Lock()
			order := make([]string, n)
			for i, c := range s.batch.queue {
				order[i] = c.ekey
			}
			next := s.batch.takeLocked()
			s.batch.mu.Unlock()
			require.Len(t, next, n)
			next[0].lead = next
			close(next[0].wake)
			wg.Wait()

			revs := map[uint64]int{}
			for i, a := range answers {
				name := fmt.Sprintf("ev-%d", i)
				if name == tc.existing {
					require.ErrorIs(t, a.err, cache.ErrAlreadyExists, name)
					continue
				}
				require.NoError(t, a.err, name)
				assert.Equal(t, name, a.obj.Key().Name, "each caller gets its own object")
				revs[a.obj.ResourceVersion()]++
				got, err := s.Get(ctx, key(name))
				require.NoError(t, err)
				assert.Equal(t, a.obj.ResourceVersion(), got.ResourceVersion())
			}
			if tc.existing == "" {
				assert.Len(t, revs, 1, "one transaction: one revision for the whole batch")
			} else {
				assert.Len(t, revs, n-1, "one by one: a revision each")
			}
			assert.False(t, s.batch.inFlight, "the flight ended with the batch")
			assert.Empty(t, s.batch.queue)

			// The watcher sees each created Event once, in version order; a batch's in the
			// order of its transaction.
			want := n
			if tc.existing != "" {
				want--
			}
			var seen []*cache.Object
			timeout := time.After(10 * time.Second)
			for len(seen) < want {
				select {
				case ev, ok := <-w.Events():
					require.True(t, ok, "watch ended: %v", w.Err())
					require.Equal(t, cache.Added, ev.Type)
					seen = append(seen, ev.Object)
				case <-timeout:
					t.Fatalf("the watcher saw %d of %d creates", len(seen), want)
				}
			}
			names := map[string]bool{}
			for i, o := range seen {
				assert.False(t, names[o.Key().Name], "seen twice: %s", o.Key().Name)
				names[o.Key().Name] = true
				if i > 0 {
					assert.GreaterOrEqual(t, o.ResourceVersion(), seen[i-1].ResourceVersion())
				}
			}
			if tc.existing == "" {
				for i, o := range seen {
					assert.Equal(t, order[i], s.keys.of(o.Key()), "the order of the transaction")
				}
			}
			select {
			case ev := <-w.Events():
				t.Fatalf("an event too many: %v %s", ev.Type, ev.Object.Key())
			default:
			}
			if tc.existing != "" {
				return
			}
			// A watcher cut off after the batch's first create resumes at its version: it gets
			// the whole batch again, in the order of the transaction.
			w.Stop()
			rw, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{events}, ResourceVersion: seen[0].ResourceVersion()})
			require.NoError(t, err)
			defer rw.Stop()
			for i := range seen {
				select {
				case ev := <-rw.Events():
					assert.Equal(t, seen[i].Key(), ev.Object.Key(), "replayed in the order of the transaction")
					assert.Equal(t, seen[i].ResourceVersion(), ev.ResourceVersion)
				case <-time.After(10 * time.Second):
					t.Fatalf("the resumed watch got %d of %d creates", i, len(seen))
				}
			}
		})
	}
}

// TestGroupCommitAlone: a create with nothing in flight leads its own batch at once and is
// written as the plain create transaction; creates without a TTL are never batched.
func TestGroupCommitAlone(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	s, err := New(Config{Client: client, Prefix: fmt.Sprintf("/batch-%d", batchPrefixes.Add(1))})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	k := cache.Key{Resource: "events", Namespace: "default", Name: "alone"}
	o, err := s.Create(ctx, k, map[string]any{"metadata": map[string]any{"name": "alone", "namespace": "default"}}, cache.WriteOptions{TTL: time.Minute})
	require.NoError(t, err)
	assert.Equal(t, s.ResourceVersion(), o.ResourceVersion())
	_, err = s.Create(ctx, k, map[string]any{"metadata": map[string]any{"name": "alone", "namespace": "default"}}, cache.WriteOptions{TTL: time.Minute})
	require.ErrorIs(t, err, cache.ErrAlreadyExists)
	assert.False(t, s.batch.inFlight)

	// Without a TTL the batcher is not involved: a batch held in flight does not delay it.
	s.batch.mu.Lock()
	s.batch.inFlight = true
	s.batch.mu.Unlock()
	k.Resource, k.Name = "widgets", "plain"
	_, err = s.Create(ctx, k, map[string]any{"metadata": map[string]any{"name": "plain", "namespace": "default"}}, cache.WriteOptions{})
	require.NoError(t, err)
	s.batch.mu.Lock()
	s.batch.inFlight = false
	s.batch.mu.Unlock()
}

// TestGroupCommitConcurrent: many concurrent TTL creates, each name twice, flow through
// batches of at most maxBatchOps: for every name exactly one caller gets the object and the
// other AlreadyExists, and a watcher sees every name once, in version order.
func TestGroupCommitConcurrent(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	s, err := New(Config{Client: client, Prefix: fmt.Sprintf("/batch-%d", batchPrefixes.Add(1))})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{{Resource: "events"}}, ResourceVersion: s.ResourceVersion()})
	require.NoError(t, err)
	defer w.Stop()

	const names = 150
	var created, exists [names]atomic.Int32
	var wg sync.WaitGroup
	for i := range 2 * names {
		wg.Go(func() {
			name := fmt.Sprintf("ev-%d", i%names)
			k := cache.Key{Resource: "events", Namespace: "default", Name: name}
			o, err := s.Create(ctx, k, map[string]any{"metadata": map[string]any{"name": name, "namespace": "default"}}, cache.WriteOptions{TTL: time.Hour})
			switch {
			case err == nil:
				assert.Equal(t, name, o.Key().Name)
				created[i%names].Add(1)
			case assert.ErrorIs(t, err, cache.ErrAlreadyExists):
				exists[i%names].Add(1)
			}
		})
	}
	wg.Wait()
	for i := range names {
		assert.Equal(t, int32(1), created[i].Load(), "ev-%d created once", i)
		assert.Equal(t, int32(1), exists[i].Load(), "ev-%d refused once", i)
	}
	seen := map[string]bool{}
	var last uint64
	for len(seen) < names {
		select {
		case ev, ok := <-w.Events():
			require.True(t, ok, "watch ended: %v", w.Err())
			require.False(t, seen[ev.Object.Key().Name], "seen twice: %s", ev.Object.Key().Name)
			seen[ev.Object.Key().Name] = true
			require.GreaterOrEqual(t, ev.ResourceVersion, last)
			last = ev.ResourceVersion
		case <-ctx.Done():
			t.Fatalf("the watcher saw %d of %d creates", len(seen), names)
		}
	}
}

// TestRefusal: only an error that is not etcd being slow, away or refusing the size makes a
// combined transaction count as refused (and batching stop, if the single ones then pass).
func TestRefusal(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"deadline", context.DeadlineExceeded, false},
		{"canceled", context.Canceled, false},
		{"too large", rpctypes.ErrRequestTooLarge, false},
		{"unavailable", status.Error(codes.Unavailable, "etcd down"), false},
		{"grpc deadline", status.Error(codes.DeadlineExceeded, "slow"), false},
		{"too many operations", rpctypes.ErrTooManyOps, true},
		{"unknown shape", status.Error(codes.Unknown, "unsupported transaction"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tc.want, refusal(tc.err))
		})
	}
}
