package leader_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/leader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// stalling is a lock whose next Update, once armed, does not return for stall: the leader's
// process is not scheduled, or its write is stuck in fsync. With afterWrite the record is
// written first (a follower sees the renewal; the leader learns of it only later); otherwise
// the call fails once the stall is over.
type stalling struct {
	rl.Interface
	stall      time.Duration
	afterWrite bool
	armed      atomic.Bool
}

func (s *stalling) Update(ctx context.Context, r rl.LeaderElectionRecord) error {
	if !s.armed.CompareAndSwap(true, false) {
		return s.Interface.Update(ctx, r)
	}
	if s.afterWrite {
		err := s.Interface.Update(ctx, r)
		time.Sleep(s.stall)
		return err
	}
	time.Sleep(s.stall)
	return errors.New("the write did not complete")
}

// TestStalledLeaderNeverOverlapsItsSuccessor: the leader stalls for 10 s in a renewal (before
// or after its write lands), long enough for the follower to take the lease. Sampled every
// 10 ms, the two never both say they lead, and never both run leader's work: the stalled one
// stops at RenewDeadline after the start of its last renewal that completed, before the
// follower's lease duration from seeing it has passed. (client-go's elector alone keeps
// leading until RenewDeadline after the start of the renewal round in which it stalled.)
func TestStalledLeaderNeverOverlapsItsSuccessor(t *testing.T) {
	backends := []struct {
		name string
		lock func(t *testing.T) func(store leader.Client, id string) rl.Interface
	}{
		{"file", func(t *testing.T) func(leader.Client, string) rl.Interface {
			path := filepath.Join(t.TempDir(), "x.lease")
			return func(_ leader.Client, id string) rl.Interface {
				return &leader.FileLock{Path: path, ID: id, Name: "default/x", LeaseDuration: lease}
			}
		}},
		{"memory", func(*testing.T) func(leader.Client, string) rl.Interface {
			return func(store leader.Client, id string) rl.Interface { return memLock(store, id) }
		}},
	}
	for _, backend := range backends {
		for _, afterWrite := range []bool{false, true} {
			name := backend.name + "/stalled before its write"
			if afterWrite {
				name = backend.name + "/stalled after its write landed"
			}
			t.Run(name, func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					store := newClient(t)
					newLock := backend.lock(t)
					aLock := &stalling{Interface: newLock(store, "a"), stall: 10 * time.Second, afterWrite: afterWrite}
					a := startCandidate(t, store, "a", aLock)
					synctest.Wait()
					require.True(t, a.el.IsLeader())
					b := startCandidate(t, store, "b", newLock(store, "b"))
					time.Sleep(2 * retry)
					synctest.Wait()
					aLock.armed.Store(true)

					var bothLead, bothWork, bLed int
					for range 2000 { // 20 s
						time.Sleep(10 * time.Millisecond)
						synctest.Wait()
						if a.el.IsLeader() && b.el.IsLeader() {
							bothLead++
						}
						if a.working.Load() && b.working.Load() {
							bothWork++
						}
						if b.el.IsLeader() {
							bLed++
						}
					}
					assert.Positive(t, bLed, "the follower took the stalled leader's lease")
					assert.Zero(t, bothLead, "instants (of 2000) at which both said they lead")
					assert.Zero(t, bothWork, "instants (of 2000) at which both ran leader's work")
					a.stop()
					b.stop()
				})
			})
		}
	}
}

// TestLeaseDurationIsWholeSeconds: a record states its lease duration in whole seconds, so a
// shorter one would read as already expired; New refuses it.
func TestLeaseDurationIsWholeSeconds(t *testing.T) {
	_, err := leader.New(leader.Config{Identity: "a", Client: newClient(t), LeaseDuration: 900 * time.Millisecond,
		RenewDeadline: 600 * time.Millisecond, RetryPeriod: 100 * time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "must be at least 1s")
}

// TestReleaseLeavesAnotherHoldersRecord: the leader's renewal lands, then it stalls for 10 s;
// the follower takes the lease; the stalled one wakes and is stopped (SIGTERM). Its release
// must not overwrite the follower's record: only a record that still names this process is
// released. (client-go's ReleaseOnCancel releases the record it just read whenever its last
// renewal named this process, which would leave the lease free while the follower leads.)
func TestReleaseLeavesAnotherHoldersRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newClient(t)
		path := filepath.Join(t.TempDir(), "x.lease")
		aLock := &stalling{Interface: &leader.FileLock{Path: path, ID: "a", Name: "default/x", LeaseDuration: lease},
			stall: 10 * time.Second, afterWrite: true}
		a := startCandidate(t, store, "a", aLock)
		synctest.Wait()
		require.True(t, a.el.IsLeader())
		b := startCandidate(t, store, "b", &leader.FileLock{Path: path, ID: "b", Name: "default/x", LeaseDuration: lease})
		time.Sleep(2 * retry)
		synctest.Wait()
		aLock.armed.Store(true)
		time.Sleep(10*time.Second + retry/2)
		synctest.Wait()
		require.True(t, b.el.IsLeader(), "the follower took the lease while the leader stalled")
		a.stop()
		raw, err := os.ReadFile(path)
		require.NoError(t, err)
		var r struct {
			HolderIdentity string `json:"holderIdentity"`
		}
		require.NoError(t, json.Unmarshal(raw, &r))
		assert.Equal(t, "b", r.HolderIdentity, "the stopped leader left its successor's record alone")
		assert.True(t, b.el.IsLeader())
		b.stop()
	})
}
