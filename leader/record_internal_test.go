package leader

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLeaseSpecRoundTrip: a record stored as a Lease is a LeaseSpec (leaseTransitions, times in
// microseconds) and reads back unchanged, to the microsecond.
func TestLeaseSpecRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 24, 10, 0, 0, 123456789, time.UTC)
	r := record{HolderIdentity: "a", LeaseDurationSeconds: 15, AcquireTime: metav1.NewMicroTime(at),
		RenewTime: metav1.NewMicroTime(at.Add(time.Second)), LeaderTransitions: 3}
	spec := r.leaseSpec()
	assert.Equal(t, map[string]any{"holderIdentity": "a", "leaseDurationSeconds": 15.0, "leaseTransitions": 3.0,
		"acquireTime": "2026-11-24T10:00:00.123456Z", "renewTime": "2026-11-24T10:00:01.123456Z"}, spec)

	raw, err := json.Marshal(spec)
	require.NoError(t, err)
	var typed coordinationv1.LeaseSpec
	require.NoError(t, json.Unmarshal(raw, &typed))
	assert.Equal(t, int32(3), *typed.LeaseTransitions)

	back := recordFromLeaseSpec(raw)
	assert.Equal(t, r.HolderIdentity, back.HolderIdentity)
	assert.Equal(t, r.LeaderTransitions, back.LeaderTransitions)
	assert.True(t, back.AcquireTime.Time.Equal(at.Truncate(time.Microsecond)))
	assert.True(t, back.RenewTime.Time.Equal(at.Add(time.Second).Truncate(time.Microsecond)))
	assert.Equal(t, record{}, recordFromLeaseSpec([]byte(`"not a spec"`)))
}
