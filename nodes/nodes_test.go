package nodes_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/nodes"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
)

const wait = 10 * time.Second

var start = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

type rig struct {
	t      *testing.T
	client *registry.Client
	store  cache.Interface
	clock  *clocktesting.FakeClock
	nodes  *nodes.Nodes
}

func newRig(t *testing.T, count int) *rig {
	env := registrytest.New(t, registrytest.Options{})
	clk := clocktesting.NewFakeClock(start)
	client := env.Registry.Client(nodes.Manager)
	n, err := nodes.New(nodes.Config{Client: client, Count: count, Clock: clk})
	require.NoError(t, err)
	return &rig{t: t, client: client, store: env.Storage, clock: clk, nodes: n}
}

func (r *rig) node(name string) (*corev1.Node, string) {
	r.t.Helper()
	obj, err := r.store.Get(context.Background(), cache.Key{Resource: "nodes", Name: name})
	require.NoError(r.t, err)
	var n corev1.Node
	require.NoError(r.t, json.Unmarshal(obj.Raw(), &n))
	return &n, obj.UID()
}

func (r *rig) lease(name string) *coordinationv1.Lease {
	r.t.Helper()
	obj, err := r.store.Get(context.Background(), cache.Key{Group: "coordination.k8s.io", Resource: "leases", Namespace: nodes.LeaseNamespace, Name: name})
	require.NoError(r.t, err)
	var l coordinationv1.Lease
	require.NoError(r.t, json.Unmarshal(obj.Raw(), &l))
	return &l
}

func ready(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

func TestNames(t *testing.T) {
	t.Parallel()
	assert.Empty(t, nodes.Names(0))
	assert.Equal(t, []string{"opemu-control-plane"}, nodes.Names(1))
	assert.Equal(t, []string{"opemu-control-plane", "opemu-worker", "opemu-worker2", "opemu-worker3"}, nodes.Names(4))
}

// TestRegister: the Nodes are made as kind's are, Ready, untainted but for the control plane
// of a cluster with workers, each with its Lease; registering again changes nothing.
func TestRegister(t *testing.T) {
	t.Parallel()
	r := newRig(t, 3)
	require.NoError(t, r.nodes.Register(context.Background()))

	cp, uid := r.node("opemu-control-plane")
	assert.Equal(t, "opemu-control-plane", cp.Labels["kubernetes.io/hostname"])
	assert.Equal(t, "linux", cp.Labels["kubernetes.io/os"])
	assert.Contains(t, cp.Labels, "node-role.kubernetes.io/control-plane")
	assert.Contains(t, cp.Labels, "node.kubernetes.io/exclude-from-external-load-balancers")
	assert.Equal(t, []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}, cp.Spec.Taints,
		"with workers the control plane takes no Pods; the not-ready taint is gone")
	assert.Equal(t, "10.244.0.0/24", cp.Spec.PodCIDR)
	assert.Equal(t, corev1.ConditionTrue, ready(cp).Status)
	assert.Equal(t, "KubeletReady", ready(cp).Reason)
	assert.Len(t, cp.Status.Conditions, 4)
	assert.Equal(t, "110", cp.Status.Allocatable.Pods().String())
	assert.Equal(t, cp.Status.Capacity, cp.Status.Allocatable)
	assert.Equal(t, nodes.KubeletVersion, cp.Status.NodeInfo.KubeletVersion)
	assert.Equal(t, int32(10250), cp.Status.DaemonEndpoints.KubeletEndpoint.Port)

	w2, _ := r.node("opemu-worker2")
	assert.NotContains(t, w2.Labels, "node-role.kubernetes.io/control-plane")
	assert.Empty(t, w2.Spec.Taints)
	assert.Equal(t, "10.244.2.0/24", w2.Spec.PodCIDR)

	l := r.lease("opemu-control-plane")
	assert.Equal(t, "opemu-control-plane", *l.Spec.HolderIdentity)
	assert.Equal(t, int32(40), *l.Spec.LeaseDurationSeconds)
	assert.True(t, l.Spec.RenewTime.Time.Equal(start))
	require.Len(t, l.OwnerReferences, 1)
	assert.Equal(t, "Node", l.OwnerReferences[0].Kind)
	assert.Equal(t, uid, string(l.OwnerReferences[0].UID))

	rv := r.store.ResourceVersion()
	require.NoError(t, r.nodes.Register(context.Background()))
	assert.Equal(t, rv, r.store.ResourceVersion(), "registered Nodes are kept")
}

// TestSingleNode: kind's single node takes Pods (no control-plane taint).
func TestSingleNode(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	require.NoError(t, r.nodes.Register(context.Background()))
	cp, _ := r.node("opemu-control-plane")
	assert.Empty(t, cp.Spec.Taints)
}

// TestBeat: each beat renews the Lease; the status is reported every 5 minutes (heartbeat
// moves, transition stays), and at once when it is not what the kubelet reports.
func TestBeat(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	ctx := context.Background()
	require.NoError(t, r.nodes.Register(ctx))
	name := "opemu-control-plane"

	r.clock.Step(nodes.RenewInterval)
	r.nodes.Beat(ctx)
	assert.True(t, r.lease(name).Spec.RenewTime.Time.Equal(start.Add(nodes.RenewInterval)))
	n, _ := r.node(name)
	assert.True(t, ready(n).LastHeartbeatTime.Time.Equal(start), "not reported before 5 minutes")

	r.clock.Step(nodes.ReportInterval)
	r.nodes.Beat(ctx)
	n, _ = r.node(name)
	assert.True(t, ready(n).LastHeartbeatTime.Time.Equal(r.clock.Now()), "reported every 5 minutes")
	assert.True(t, ready(n).LastTransitionTime.Time.Equal(start), "still Ready since registration")

	// Someone says the Node is not Ready: its kubelet says otherwise at the next beat.
	obj, err := r.store.Get(ctx, cache.Key{Resource: "nodes", Name: name})
	require.NoError(t, err)
	m, err := obj.Decode()
	require.NoError(t, err)
	for _, c := range m["status"].(map[string]any)["conditions"].([]any) {
		if c := c.(map[string]any); c["type"] == "Ready" {
			c["status"], c["reason"] = "False", "Broken"
		}
	}
	_, err = r.client.UpdateStatus(ctx, obj.Key(), m)
	require.NoError(t, err)
	r.clock.Step(time.Second)
	r.nodes.Beat(ctx)
	n, _ = r.node(name)
	assert.Equal(t, corev1.ConditionTrue, ready(n).Status)
	assert.True(t, ready(n).LastTransitionTime.Time.Equal(r.clock.Now()), "it became Ready again now")
}

// TestDeletedNode: a Node someone deleted is not registered again by the heartbeat, and its
// Lease is no longer renewed.
func TestDeletedNode(t *testing.T) {
	t.Parallel()
	r := newRig(t, 2)
	ctx := context.Background()
	require.NoError(t, r.nodes.Register(ctx))
	_, _, err := r.client.Delete(ctx, cache.Key{Resource: "nodes", Name: "opemu-worker"}, cache.Preconditions{})
	require.NoError(t, err)
	r.clock.Step(nodes.RenewInterval)
	r.nodes.Beat(ctx)
	_, err = r.store.Get(ctx, cache.Key{Resource: "nodes", Name: "opemu-worker"})
	require.ErrorIs(t, err, cache.ErrNotFound)
	assert.True(t, r.lease("opemu-worker").Spec.RenewTime.Time.Equal(start))
	assert.True(t, r.lease("opemu-control-plane").Spec.RenewTime.Time.Equal(r.clock.Now()))
}

// TestRun: the heartbeat follows the clock: a step of RenewInterval renews the Leases.
func TestRun(t *testing.T) {
	t.Parallel()
	r := newRig(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, r.nodes.Register(ctx))
	done := make(chan error, 1)
	go func() { done <- r.nodes.Run(ctx) }()
	defer func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(wait):
			t.Error("Run did not return")
		}
	}()
	require.Eventually(t, r.clock.HasWaiters, wait, time.Millisecond, "Run waits on the clock")
	r.clock.Step(nodes.RenewInterval)
	require.Eventually(t, func() bool {
		return r.lease("opemu-control-plane").Spec.RenewTime.Time.Equal(start.Add(nodes.RenewInterval))
	}, wait, time.Millisecond)
}
