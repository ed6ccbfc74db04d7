package leader_test

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/leader"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

var ctx = context.Background()

func rec(holder string) rl.LeaderElectionRecord {
	now := metav1.NewTime(time.Now())
	return rl.LeaderElectionRecord{HolderIdentity: holder, LeaseDurationSeconds: 15, AcquireTime: now, RenewTime: now}
}

func TestFileLock(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lease")
	a := &leader.FileLock{Path: path, ID: "a", Name: "default/x"}
	b := &leader.FileLock{Path: path, ID: "b", Name: "default/x"}

	_, _, err := a.Get(ctx)
	require.True(t, apierrors.IsNotFound(err), "no record yet: %v", err)
	require.NoError(t, a.Create(ctx, rec("a")))
	require.True(t, apierrors.IsAlreadyExists(b.Create(ctx, rec("b"))), "two creators never both win")

	got, raw, err := b.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, "a", got.HolderIdentity)
	assert.Contains(t, string(raw), `"holderIdentity":"a"`)

	// a renews; b's view is now stale, so b's update conflicts.
	require.NoError(t, a.Update(ctx, rec("a")))
	require.True(t, apierrors.IsConflict(b.Update(ctx, rec("b"))))
	_, _, err = b.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, b.Update(ctx, rec("b")), "after reading again it may write")
	got, _, err = a.Get(ctx)
	require.NoError(t, err)
	assert.Equal(t, "b", got.HolderIdentity)

	// The lock file is separate and stays; no temporary files are left behind.
	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.ElementsMatch(t, []string{"x.lease", "x.lease.lock"}, names)
	assert.Equal(t, "a", a.Identity())
	assert.Contains(t, a.Describe(), "default/x")
}

// damage writes content over the lease file in place (not by rename), as a stray writer would.
func damage(t *testing.T, path, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
}

var damaged = []struct{ name, content string }{
	{"empty", ""},
	{"not JSON", "{not json"},
	{"binary", "\x00\x01"},
	{"JSON but no record", "{}"},
	{"null", "null"},
	{"a record cut short", `{"holderIdentity":"a","leaseDurationSeconds":15,"acq`},
}

// TestFileLockSameDamageTwiceIsAChange: the same damage made again after a repair the
// candidate never read reads as a change, so the elector times it afresh (not from its first
// sight of the first damage, which would let it take a lease the leader renewed meanwhile).
func TestFileLockSameDamageTwiceIsAChange(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lease")
	leaderLock := &leader.FileLock{Path: path, ID: "a", Name: "default/x", LeaseDuration: 2500 * time.Millisecond}
	follower := &leader.FileLock{Path: path, ID: "b", Name: "default/x", LeaseDuration: 2500 * time.Millisecond}
	require.NoError(t, leaderLock.Create(ctx, rec("a")))
	_, _, err := follower.Get(ctx)
	require.NoError(t, err)
	garbage := func(at time.Time) {
		require.NoError(t, os.WriteFile(path, []byte("garbage\n"), 0o644))
		require.NoError(t, os.Chtimes(path, at, at))
	}
	first := time.Now().Add(-time.Minute)
	garbage(first)
	_, raw1, err := follower.Get(ctx)
	require.NoError(t, err)
	// The leader repairs it (the follower does not read the repair), then the same damage again.
	_, _, err = leaderLock.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, leaderLock.Update(ctx, rec("a")))
	garbage(first.Add(time.Second))
	_, raw2, err := follower.Get(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, raw1, raw2, "the second damage is a new record to the elector")
}

// TestFileLockDamagedRecordIsHeld: a candidate that never saw a good record sees a damaged one
// held by an unknown holder for the lease duration (the elector times it from its first
// sight); once the elector decides to take it, the update goes through over the damage.
func TestFileLockDamagedRecordIsHeld(t *testing.T) {
	t.Parallel()
	for _, tt := range damaged {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "x.lease")
			damage(t, path, tt.content)
			l := &leader.FileLock{Path: path, ID: "a", Name: "default/x", LeaseDuration: 2500 * time.Millisecond}
			got, raw, err := l.Get(ctx)
			require.NoError(t, err)
			assert.NotEmpty(t, got.HolderIdentity, "a damaged record is not free")
			assert.NotEqual(t, "a", got.HolderIdentity)
			assert.Equal(t, 3, got.LeaseDurationSeconds, "held for the lease duration, in whole seconds")
			assert.True(t, strings.HasPrefix(string(raw), tt.content+"\x00mtime="), "the raw record is the damage itself and when it was made, so the elector times it: %q", raw)
			require.NoError(t, l.Update(ctx, rec("a")), "taking it when the elector decides to")
			got, _, err = l.Get(ctx)
			require.NoError(t, err)
			assert.Equal(t, "a", got.HolderIdentity)
		})
	}
}

// TestFileLockHolderRepairsDamage: the holder that last wrote the record still sees it as its
// own, and its renewal writes over the damage; another candidate sees it held by that holder,
// and cannot write over it meanwhile.
func TestFileLockHolderRepairsDamage(t *testing.T) {
	t.Parallel()
	for _, tt := range append(damaged, struct{ name, content string }{"removed", ""}) {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "x.lease")
			a := &leader.FileLock{Path: path, ID: "a", Name: "default/x", LeaseDuration: 15 * time.Second}
			b := &leader.FileLock{Path: path, ID: "b", Name: "default/x", LeaseDuration: 15 * time.Second}
			require.NoError(t, a.Create(ctx, rec("a")))
			_, _, err := b.Get(ctx)
			require.NoError(t, err)
			if tt.name == "removed" {
				require.NoError(t, os.Remove(path))
			} else {
				damage(t, path, tt.content)
			}
			got, _, err := b.Get(ctx)
			require.NoError(t, err)
			assert.Equal(t, "a", got.HolderIdentity, "b: held by the holder it last saw")
			got, _, err = a.Get(ctx)
			require.NoError(t, err)
			assert.Equal(t, "a", got.HolderIdentity, "a: still its own")
			require.NoError(t, a.Update(ctx, rec("a")), "a's renewal repairs the record")
			raw, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Contains(t, string(raw), `"holderIdentity":"a"`)
			require.True(t, apierrors.IsConflict(b.Update(ctx, rec("b"))), "b's view of the damage is stale now")
		})
	}
}

// TestFileLockOwnExpiredLeaseIsNotClaimed: a holder whose own lease has run out does not claim a
// damaged record as its own.
func TestFileLockOwnExpiredLeaseIsNotClaimed(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lease")
	a := &leader.FileLock{Path: path, ID: "a", Name: "default/x", LeaseDuration: 15 * time.Second}
	old := rec("a")
	old.RenewTime = metav1.NewTime(time.Now().Add(-time.Minute))
	require.NoError(t, a.Create(ctx, old))
	damage(t, path, "garbage")
	got, _, err := a.Get(ctx)
	require.NoError(t, err)
	assert.NotEmpty(t, got.HolderIdentity)
	assert.NotEqual(t, "a", got.HolderIdentity)
}

// TestFileLockOwnLeaseEndsAsFollowersSeeIt: a lease duration of 2.5 s is recorded as 2 s, and
// followers take the lease 2 s after seeing the record; 2.2 s after its renewal the holder no
// longer claims a damaged record as its own (a follower may have taken it, and the damage may
// have hidden that).
func TestFileLockOwnLeaseEndsAsFollowersSeeIt(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lease")
	a := &leader.FileLock{Path: path, ID: "a", Name: "default/x", LeaseDuration: 2500 * time.Millisecond}
	r := rec("a")
	r.LeaseDurationSeconds = 2
	r.RenewTime = metav1.NewTime(time.Now().Add(-2200 * time.Millisecond))
	require.NoError(t, a.Create(ctx, r))
	damage(t, path, "garbage")
	got, _, err := a.Get(ctx)
	require.NoError(t, err)
	assert.NotEqual(t, "a", got.HolderIdentity)
}

// TestFileLockWarnsOncePerDamage: reading a damaged record many times warns once; new damage
// warns again.
func TestFileLockWarnsOncePerDamage(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "x.lease")
	var logs bytes.Buffer
	l := &leader.FileLock{Path: path, ID: "a", Name: "default/x", Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	require.NoError(t, l.Create(ctx, rec("a")))
	warnings := func() int { return strings.Count(logs.String(), "level=WARN") }
	damage(t, path, "garbage")
	for range 100 {
		_, ok := l.Peek()
		require.True(t, ok)
		_, _, err := l.Get(ctx)
		require.NoError(t, err)
	}
	assert.Equal(t, 1, warnings())
	damage(t, path, "")
	l.Peek()
	assert.Equal(t, 2, warnings())
	_, _, err := l.Get(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Update(ctx, rec("a")))
	l.Peek()
	damage(t, path, "")
	l.Peek()
	assert.Equal(t, 3, warnings(), "damage after a repair is news again")
}

// TestFileLockReadsWithACap: a 200 MB lease file is read as damage in a bounded read: quickly
// and without holding its size in memory.
func TestFileLockReadsWithACap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lease")
	l := &leader.FileLock{Path: path, ID: "a", Name: "default/x"}
	require.NoError(t, l.Create(ctx, rec("a")))
	require.NoError(t, os.Truncate(path, 200<<20)) // sparse: no disk is used
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	start := time.Now()
	r, ok := l.Peek()
	require.True(t, ok)
	got, _, err := l.Get(ctx)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	assert.Equal(t, "a", r.HolderIdentity)
	assert.Equal(t, "a", got.HolderIdentity, "still its own: it repairs it")
	assert.Less(t, took, time.Second)
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "allocated while reading")
	require.NoError(t, l.Update(ctx, rec("a")))
	fi, err := os.Stat(path)
	require.NoError(t, err)
	assert.Less(t, fi.Size(), int64(1024), "repaired")
}
