package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// leaseOf reads the elector's Lease from p twice: with client-go's typed client, and as raw JSON
// decoded strictly into coordinationv1.Lease (a field Kubernetes does not have fails it).
func leaseOf(t *testing.T, p *proc) (*coordinationv1.Lease, map[string]any) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(restConfig(p))
	require.NoError(t, err)
	lease, err := cs.CoordinationV1().Leases("default").Get(context.Background(), "elide-operator-leader", metav1.GetOptions{})
	require.NoError(t, err)

	resp, err := http.Get("http://" + p.addr + "/apis/coordination.k8s.io/v1/namespaces/default/leases/elide-operator-leader")
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var strict coordinationv1.Lease
	require.NoError(t, dec.Decode(&strict), "the Lease is a valid coordination.k8s.io/v1 Lease: %s", raw)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	return lease, m["spec"].(map[string]any)
}

// microTime is how a LeaseSpec writes acquireTime and renewTime (metav1.MicroTime).
const microTime = `^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$`

// TestLeaseIsALeaseSpec: the elector's Lease (the memory backend's lock, the file backend's
// mirror) is a valid LeaseSpec, so typed clients see leaseTransitions; /leader keeps its shape.
func TestLeaseIsALeaseSpec(t *testing.T) {
	t.Parallel()
	t.Run("memory backend", func(t *testing.T) {
		t.Parallel()
		p := start(t, "LEASE_BACKEND=memory", "ENABLE_CONTROLLER=true")
		require.Eventually(t, func() bool {
			code, l := httpJSON(t, "GET", "http://"+p.addr+"/leader", "")
			return code == http.StatusOK && l["isLeader"] == true
		}, 5*time.Second, 10*time.Millisecond)
		lease, spec := leaseOf(t, p)
		require.NotNil(t, lease.Spec.HolderIdentity)
		require.NotNil(t, lease.Spec.LeaseTransitions)
		assert.Equal(t, int32(0), *lease.Spec.LeaseTransitions)
		assert.Equal(t, int32(15), *lease.Spec.LeaseDurationSeconds)
		assert.Regexp(t, microTime, spec["renewTime"])
		assert.Regexp(t, microTime, spec["acquireTime"])
	})
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
			lease, _ := leaseOf(t, second.p)
			return lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == "lease-2"
		}, 5*haRetry, 10*time.Millisecond)
		lease, spec := leaseOf(t, second.p)
		require.NotNil(t, lease.Spec.LeaseTransitions)
		assert.Equal(t, int32(1), *lease.Spec.LeaseTransitions, "typed clients see the transition")
		assert.Equal(t, int32(haLease/time.Second), *lease.Spec.LeaseDurationSeconds)
		assert.Regexp(t, microTime, spec["renewTime"])
		assert.NotContains(t, spec, "leaderTransitions")
		assert.Equal(t, "file", lease.Labels["opemu.dev/mirror"])

		code, l := httpJSON(t, "GET", "http://"+second.p.addr+"/leader", "")
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
