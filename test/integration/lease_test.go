package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// TestLeaseIsALeaseSpec: the elector's Lease (the memory backend's lock) is a valid LeaseSpec,
// so typed clients see leaseTransitions. (The file backend's mirror, after a failover between
// processes, is tested in test/e2e.)
func TestLeaseIsALeaseSpec(t *testing.T) {
	t.Parallel()
	t.Run("memory backend", func(t *testing.T) {
		t.Parallel()
		p := start(t, "LEASE_BACKEND=memory", "ENABLE_CONTROLLER=true")
		require.Eventually(t, func() bool {
			code, l := request.JSON(t, "GET", "http://"+p.addr+"/leader", "")
			return code == http.StatusOK && l["isLeader"] == true
		}, 5*time.Second, 10*time.Millisecond)
		lease, spec := request.Lease(t, p.url(""))
		require.NotNil(t, lease.Spec.HolderIdentity)
		require.NotNil(t, lease.Spec.LeaseTransitions)
		assert.Equal(t, int32(0), *lease.Spec.LeaseTransitions)
		assert.Equal(t, int32(15), *lease.Spec.LeaseDurationSeconds)
		assert.Regexp(t, request.MicroTime, spec["renewTime"])
		assert.Regexp(t, request.MicroTime, spec["acquireTime"])
	})
}
