package leader_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/leader"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

const (
	lease = 4 * time.Second
	renew = 3 * time.Second
	retry = time.Second
)

// candidate is one elector with its own context and a record of its leadership terms.
type candidate struct {
	el      *leader.Elector
	cancel  context.CancelFunc
	done    chan struct{}
	metrics *metrics.Registry
	terms   atomic.Int32
	working atomic.Bool
}

func startCandidate(t *testing.T, store leader.Client, id string, lock rl.Interface) *candidate {
	t.Helper()
	c := &candidate{done: make(chan struct{}), metrics: metrics.New()}
	el, err := leader.New(leader.Config{
		Identity: id, Client: store, Lock: lock, LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
		Metrics: c.metrics,
		OnStartedLeading: func(ctx context.Context) {
			c.terms.Add(1)
			c.working.Store(true)
			<-ctx.Done()
			time.Sleep(100 * time.Millisecond) // finishing the current item
			c.working.Store(false)
		},
	})
	require.NoError(t, err)
	c.el = el
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go func() { _ = el.Run(ctx); close(c.done) }()
	return c
}

func (c *candidate) stop() { c.cancel(); <-c.done }

func gauge(t *testing.T, reg *metrics.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gatherer().Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() == name {
			m := mf.GetMetric()[0]
			if m.Gauge != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	return -1
}

func memLock(store leader.Client, id string) *leader.MemoryLock {
	return &leader.MemoryLock{Client: store, Namespace: "default", Name: "test-lease", ID: id}
}

func TestElectionReleaseAndTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClient(t)
		a := startCandidate(t, store, "a", memLock(store, "a"))
		synctest.Wait()
		require.True(t, a.el.IsLeader())
		b := startCandidate(t, store, "b", memLock(store, "b"))
		time.Sleep(3 * retry)
		synctest.Wait()
		assert.False(t, b.el.IsLeader())
		assert.Equal(t, "a", b.el.Leader(), "the follower knows who leads")
		assert.Equal(t, 1.0, gauge(t, a.metrics, "leader_election_status"))
		assert.Equal(t, 0.0, gauge(t, b.metrics, "leader_election_status"))

		// Graceful stop: a's work finishes first (Run returns only after it), the lease is
		// released, and b leads within 2.2 × RetryPeriod.
		a.stop()
		assert.False(t, a.working.Load(), "Run returned only after the work stopped")
		assert.False(t, a.el.IsLeader())
		require.Eventually(t, func() bool { return b.el.IsLeader() }, time.Duration(2.2*float64(retry))+time.Millisecond, 10*time.Millisecond)
		assert.Equal(t, 2.0, gauge(t, a.metrics, "leader_transitions_total"), "gained and lost")
		assert.Equal(t, 0.0, gauge(t, a.metrics, "leader_election_status"))
		lease := b.el.Lease().(*leader.Info)
		assert.Equal(t, "b", lease.HolderIdentity)
		assert.Equal(t, 1, lease.LeaderTransitions)
		b.stop()
	})
}

func TestExpiryAfterCrash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClient(t)
		// a "crashes": its lock stops writing, so it stops renewing; b must wait for expiry.
		aLock := &failing{Interface: memLock(store, "a")}
		a := startCandidate(t, store, "a", aLock)
		synctest.Wait()
		require.True(t, a.el.IsLeader())
		b := startCandidate(t, store, "b", memLock(store, "b"))
		synctest.Wait()
		crash := time.Now()
		aLock.fail.Store(true)

		// a gives up at RenewDeadline: its work is told to stop.
		time.Sleep(renew + 2*retry)
		synctest.Wait()
		assert.False(t, a.el.IsLeader(), "renewal failing past RenewDeadline loses the lease")
		assert.Equal(t, int32(1), a.terms.Load())

		require.Eventually(t, func() bool { return b.el.IsLeader() }, lease+time.Duration(4.4*float64(retry)), 10*time.Millisecond)
		took := time.Since(crash)
		assert.GreaterOrEqual(t, took, lease-retry, "b waited for the lease to expire")
		a.stop()
		b.stop()
	})
}

// failing makes Create and Update fail once fail is set (a crashed or partitioned holder).
type failing struct {
	rl.Interface
	fail atomic.Bool
}

func (f *failing) Update(ctx context.Context, r rl.LeaderElectionRecord) error {
	if f.fail.Load() {
		return errors.New("injected failure")
	}
	return f.Interface.Update(ctx, r)
}

func TestLeaderEventsAndMirror(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClient(t)
		var mu sync.Mutex
		var msgs []string
		el, err := leader.New(leader.Config{
			Identity: "solo", Client: store, Backend: leader.BackendMemory, LeaseName: "solo-lease",
			LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry,
			OnEvent: func(reason, message string) { mu.Lock(); msgs = append(msgs, reason+": "+message); mu.Unlock() },
		})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = el.Run(ctx); close(done) }()
		synctest.Wait()
		require.True(t, el.IsLeader())
		o, err := store.Get(context.Background(), cache.Key{Group: "coordination.k8s.io", Resource: "leases", Namespace: "default", Name: "solo-lease"})
		require.NoError(t, err, "the memory backend's lock is a Lease in the store")
		obj, _ := o.Decode()
		assert.Equal(t, "solo", obj["spec"].(map[string]any)["holderIdentity"])
		_, mirrored := el.MirrorKey()
		assert.False(t, mirrored)
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		assert.Contains(t, msgs, "LeaderElection: solo became leader")
	})
}

// TestFileBackendTakesACorruptLeaseAfterItsDuration: a candidate that finds a damaged record
// (and never saw a good one) treats it as held until the lease duration has passed since it
// first saw it, then takes it.
func TestFileBackendTakesACorruptLeaseAfterItsDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClient(t)
		path := filepath.Join(t.TempDir(), "x.lease")
		require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o644))
		el, err := leader.New(leader.Config{Identity: "f", Client: store, Backend: leader.BackendFile, LeaseFile: path,
			LeaseDuration: lease, RenewDeadline: renew, RetryPeriod: retry})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		started := time.Now()
		go func() { _ = el.Run(ctx); close(done) }()
		for !el.IsLeader() {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			require.Less(t, time.Since(started), lease+3*retry, "it takes the lease once the duration has passed")
		}
		took := time.Since(started)
		assert.GreaterOrEqual(t, took, lease, "not before the lease duration has passed")
		key, mirrored := el.MirrorKey()
		require.True(t, mirrored)
		time.Sleep(retry) // the mirror refreshes every RetryPeriod
		synctest.Wait()
		o, err := store.Get(context.Background(), key)
		require.NoError(t, err, "the file lease is mirrored as a Lease")
		obj, _ := o.Decode()
		assert.Equal(t, "f", obj["spec"].(map[string]any)["holderIdentity"])
		cancel()
		<-done
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"holderIdentity":""`, "released on graceful stop")
	})
}

// TestFileBackendCorruptionNeverGivesTwoLeaders: three candidates share a lease file that is
// damaged 20 times (garbage, empty, a cut-short record, removed, 200 MB) at varied moments.
// Sampled every 10 ms of fake time, never two lead, and the leader never changes: it repairs
// each damage at its next renewal while the others wait.
func TestFileBackendCorruptionNeverGivesTwoLeaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClient(t)
		path := filepath.Join(t.TempDir(), "x.lease")
		var cs []*candidate
		for _, id := range []string{"a", "b", "c"} {
			lock := &leader.FileLock{Path: path, ID: id, Name: "default/x", LeaseDuration: lease}
			cs = append(cs, startCandidate(t, store, id, lock))
		}
		defer func() {
			for _, c := range cs {
				c.stop()
			}
		}()
		leaders := func() []string {
			var out []string
			for i, c := range cs {
				if c.el.IsLeader() {
					out = append(out, []string{"a", "b", "c"}[i])
				}
			}
			return out
		}
		var first string
		for first == "" {
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			if l := leaders(); len(l) == 1 {
				first = l[0]
			}
		}
		repaired := func() bool {
			if fi, err := os.Stat(path); err != nil || fi.Size() > 1024 {
				return false
			}
			raw, err := os.ReadFile(path)
			return err == nil && strings.Contains(string(raw), `"holderIdentity":"`+first+`"`)
		}
		damages := []func(){
			func() { require.NoError(t, os.WriteFile(path, []byte("garbage"), 0o644)) },
			func() { require.NoError(t, os.WriteFile(path, nil, 0o644)) },
			func() { require.NoError(t, os.WriteFile(path, []byte(`{"holderIdentity":"b","leaseDurat`), 0o644)) },
			func() { require.NoError(t, os.Remove(path)) },
			func() { require.NoError(t, os.Truncate(path, 200<<20)) },
		}
		samples := 0
		for i := range 20 {
			// Land the damage at varied points of the renewal cycle.
			time.Sleep(time.Duration(i%7) * retry / 7)
			synctest.Wait()
			damages[i%len(damages)]()
			for step := 0; ; step++ {
				time.Sleep(10 * time.Millisecond)
				synctest.Wait()
				samples++
				require.Equal(t, []string{first}, leaders(), "damage %d, %d ms after", i, 10*(step+1))
				if repaired() {
					break
				}
				require.Less(t, step, 300, "damage %d not repaired within 3 s", i)
			}
		}
		t.Logf("20 damages, %d samples: one leader, %s, throughout", samples, first)
	})
}

// newClient returns the in-process API client of a fresh store, the way app wires the elector.
func newClient(t *testing.T) *registry.Client {
	return registrytest.New(t, registrytest.Options{}).Registry.Client("leader-elector")
}
