package e2e

import (
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// The elector's Lease when the lease file decides who leads (the file backend's mirror), after
// a failover between processes. The memory backend's Lease is tested in process
// (test/integration).

// TestLeaseIsALeaseSpec: the elector's Lease (the file backend's mirror) is a valid LeaseSpec,
// so typed clients see leaseTransitions; /leader keeps its shape.
func TestLeaseIsALeaseSpec(t *testing.T) {
	t.Parallel()
	t.Run("file backend mirror, after a failover", func(t *testing.T) {
		t.Parallel()
		file := filepath.Join(t.TempDir(), "ha.lease")
		first := startReplica(t, "lease-1", file)
		waitLeader(t, 2*haRetry, first)
		second := startReplica(t, "lease-2", file)
		require.NoError(t, first.p.cmd.Process.Signal(syscall.SIGKILL))
		waitLeader(t, haLease+failoverJitter, second)
		// The mirror is refreshed every RETRY_PERIOD.
		require.Eventually(t, func() bool {
			lease, _ := request.Lease(t, "http://"+second.p.addr)
			return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == "lease-2"
		}, 5*haRetry, 10*time.Millisecond)
		lease, spec := request.Lease(t, "http://"+second.p.addr)
		require.NotNil(t, lease.Spec.LeaseTransitions)
		assert.Equal(t, int32(1), *lease.Spec.LeaseTransitions, "typed clients see the transition")
		assert.Equal(t, int32(haLease/time.Second), *lease.Spec.LeaseDurationSeconds)
		assert.Regexp(t, request.MicroTime, spec["renewTime"])
		assert.NotContains(t, spec, "leaderTransitions")
		assert.Equal(t, "file", lease.Labels["opemu.dev/mirror"])

		code, l := request.JSON(t, "GET", "http://"+second.p.addr+"/leader", "")
		require.Equal(t, http.StatusOK, code)
		assert.EqualValues(t, 1, field(l, "lease", "leaderTransitions"), "/leader keeps its own shape")
		assert.NotContains(t, l["lease"], "leaseTransitions")
	})
}

// field walks nested JSON objects.
func field(m map[string]any, path ...string) any {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[p]
	}
	return cur
}
