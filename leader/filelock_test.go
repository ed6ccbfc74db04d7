package leader_test

import (
	"context"
	"os"
	"path/filepath"
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

func TestFileLockCorruptRecordIsFree(t *testing.T) {
	t.Parallel()
	for _, content := range []string{"", "{not json", "\x00\x01"} {
		path := filepath.Join(t.TempDir(), "x.lease")
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
		l := &leader.FileLock{Path: path, ID: "a", Name: "default/x"}
		got, _, err := l.Get(ctx)
		require.NoError(t, err)
		assert.Empty(t, got.HolderIdentity, "a corrupt or empty record is a free lease")
		require.NoError(t, l.Update(ctx, rec("a")), "and can be taken")
		got, _, err = l.Get(ctx)
		require.NoError(t, err)
		assert.Equal(t, "a", got.HolderIdentity)
	}
}
