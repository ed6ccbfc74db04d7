package workloads_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/nodes"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/opemu/opemu/workloads"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// newCluster is the write path with controllers over it, as app wires them: the Deployment,
// ReplicaSet, StatefulSet, DaemonSet, Job and CronJob controllers (each hearing of its children, the
// DaemonSets of the Nodes), the scheduler and kubelets of one Node, whose Pods run a virtual
// second after they are bound, and the node lifecycle controller; inside a synctest bubble.
func newCluster(t *testing.T) *rig { return newClusterOf(t, 1) }

// jobPodRuntime is how long the kubelets leave a Job's Pod running: longer than any test, so
// the tests drive their Pods' phases as a test of kube's Job controller would.
const jobPodRuntime = time.Hour

// newClusterOf is newCluster with count Nodes (opemu-control-plane, opemu-worker, ...).
func newClusterOf(t *testing.T, count int) *rig {
	t.Helper()
	env := registrytest.New(t, registrytest.Options{})
	rec := &recorder{}
	cfg := workloads.Config{Client: env.Registry.Client("workloads"), Events: rec}
	n, err := nodes.New(nodes.Config{Client: env.Registry.Client(nodes.Manager), Count: count, Clock: clock.RealClock{}})
	require.NoError(t, err)
	require.NoError(t, n.Register(ctx))
	pods, err := nodes.NewPods(nodes.PodsConfig{Client: env.Registry.Client(nodes.SchedulerManager), Nodes: n, StartDelay: time.Second, CompleteDelay: jobPodRuntime})
	require.NoError(t, err)
	lifecycle, err := nodes.NewLifecycle(nodes.LifecycleConfig{Client: env.Registry.Client(nodes.LifecycleManager), Events: rec})
	require.NoError(t, err)
	daemonSets := workloads.NewDaemonSets(cfg)
	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = n.Run(cctx) }) // the kubelets' heartbeats
	for _, c := range []struct {
		gr    cache.GroupResource
		r     reconciler.Reconciler
		owner workloads.Owner
	}{
		{gr: workloads.DeploymentResource, r: workloads.NewDeployments(cfg), owner: workloads.DeploymentOwner},
		{gr: workloads.ReplicaSetResource, r: workloads.NewReplicaSets(cfg), owner: workloads.ReplicaSetOwner},
		{gr: workloads.StatefulSetResource, r: workloads.NewStatefulSets(cfg), owner: workloads.StatefulSetOwner},
		{gr: workloads.DaemonSetResource, r: daemonSets, owner: workloads.DaemonSetOwner},
		{gr: workloads.JobResource, r: workloads.NewJobs(cfg), owner: workloads.JobOwner},
		{gr: workloads.CronJobResource, r: workloads.NewCronJobs(cfg), owner: workloads.CronJobOwner},
		{gr: nodes.PodsResource, r: pods},
		{gr: nodes.NodesResource, r: lifecycle},
	} {
		ctrl, err := reconciler.New(reconciler.Config{Store: env.Storage, Resource: c.gr, Reconciler: c.r, Name: c.gr.Resource})
		require.NoError(t, err)
		wg.Go(func() { _ = ctrl.Run(cctx) })
		children := workloads.PodResource
		switch c.owner {
		case workloads.DeploymentOwner:
			children = workloads.ReplicaSetResource
		case workloads.CronJobOwner:
			children = workloads.JobResource
		}
		if c.owner.Kind != "" {
			wg.Go(func() { workloads.FollowChildren(cctx, env.Storage, children, c.owner, ctrl.Enqueue) })
		}
		switch c.gr {
		case nodes.PodsResource:
			wg.Go(func() { pods.FollowNodes(cctx, env.Storage, ctrl.Enqueue) })
		case workloads.DaemonSetResource:
			wg.Go(func() { daemonSets.FollowNodes(cctx, env.Storage, ctrl.Enqueue) })
		case nodes.NodesResource:
			wg.Go(func() { lifecycle.Follow(cctx, env.Storage, ctrl.Enqueue) })
		}
	}
	return &rig{t: t, client: env.Registry.Client("test"), events: rec, stop: func() {
		cancel()
		wg.Wait()
		env.Storage.Close()
	}}
}

// setPodPhase writes the phase of the Pod name (namespace default) through its status, as a
// kubelet would.
func (r *rig) setPodPhase(name string, phase corev1.PodPhase) {
	r.t.Helper()
	key := cache.Key{Resource: "pods", Namespace: "default", Name: name}
	o, err := r.client.Get(ctx, key)
	require.NoError(r.t, err)
	m, err := o.Decode()
	require.NoError(r.t, err)
	m["status"].(map[string]any)["phase"] = string(phase)
	_, err = r.client.UpdateStatus(ctx, key, m)
	require.NoError(r.t, err)
}

// podNames lists the names of the Pods of namespace default whose labels sel selects ("":
// all), sorted.
func (r *rig) podNames(sel string) []string {
	r.t.Helper()
	opts := []cache.ListOption{cache.InNamespace("default")}
	if sel != "" {
		s, err := labels.Parse(sel)
		require.NoError(r.t, err)
		opts = append(opts, cache.MatchingLabels(s))
	}
	l, err := r.client.List(ctx, workloads.PodResource, opts...)
	require.NoError(r.t, err)
	var out []string
	for _, o := range l.Items {
		out = append(out, o.Key().Name)
	}
	slices.Sort(out)
	return out
}

// pods lists the Pods of namespace default.
func (r *rig) pods() []corev1.Pod {
	r.t.Helper()
	l, err := r.client.List(ctx, workloads.PodResource, cache.InNamespace("default"))
	require.NoError(r.t, err)
	var out []corev1.Pod
	for _, o := range l.Items {
		var p corev1.Pod
		r.get(o.Key(), &p)
		out = append(out, p)
	}
	return out
}

func rsKey(name string) cache.Key {
	return cache.Key{Group: "apps", Resource: "replicasets", Namespace: "default", Name: name}
}

// TestReplicaSetRunsPods: a ReplicaSet creates its Pods (owned, bound to the Node, Running
// and Ready a second later), counts them in its status, and deletes the surplus on a scale
// down (gracefully: the kubelet removes them).
func TestReplicaSetRunsPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		key := rsKey("web")
		r.create(key, &appsv1.ReplicaSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: podTemplate("nginx:1.27")},
		})
		synctest.Wait()
		var rs appsv1.ReplicaSet
		r.get(key, &rs)
		assert.Equal(t, int32(3), rs.Status.Replicas)
		assert.Zero(t, rs.Status.ReadyReplicas, "bound, not yet running")
		pods := r.pods()
		require.Len(t, pods, 3)
		for _, p := range pods {
			assert.Equal(t, "opemu-control-plane", p.Spec.NodeName)
			assert.Equal(t, corev1.PodPending, p.Status.Phase)
			ref := metav1.GetControllerOf(&p)
			require.NotNil(t, ref)
			assert.Equal(t, rs.UID, ref.UID)
			assert.True(t, *ref.BlockOwnerDeletion)
			assert.Regexp(t, `^web-[a-z0-9]{5}$`, p.Name)
		}
		assert.Len(t, r.events.messages("SuccessfulCreate"), 3)

		tick()
		r.get(key, &rs)
		assert.Equal(t, int32(3), rs.Status.ReadyReplicas)
		assert.Equal(t, int32(3), rs.Status.AvailableReplicas)
		for _, p := range r.pods() {
			assert.Equal(t, corev1.PodRunning, p.Status.Phase)
			assert.NotEmpty(t, p.Status.PodIP)
		}

		r.update(key, &rs, func() { rs.Spec.Replicas = ptr.To[int32](1) })
		synctest.Wait()
		r.get(key, &rs)
		assert.Equal(t, int32(1), rs.Status.Replicas)
		assert.Len(t, r.pods(), 1, "the kubelet removed the deleted Pods")
		assert.Len(t, r.events.messages("SuccessfulDelete"), 2)
	})
}

// TestUnschedulablePodStaysPending: a Pod no Node fits keeps Pending with the PodScheduled
// condition kube-scheduler writes.
func TestUnschedulablePodStaysPending(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		for name, spec := range map[string]corev1.PodSpec{
			"selector": {NodeSelector: map[string]string{"disk": "ssd"}},
			"cpu": {Containers: []corev1.Container{{Name: "c", Image: "nginx", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: *resourceQuantity("100")}}}}},
			"taint": {Tolerations: nil},
		} {
			if len(spec.Containers) == 0 {
				spec.Containers = []corev1.Container{{Name: "c", Image: "nginx"}}
			}
			r.create(cache.Key{Resource: "pods", Namespace: "default"}, &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec})
		}
		synctest.Wait()
		msgs := map[string]string{}
		for _, p := range r.pods() {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled {
					msgs[p.Name] = string(c.Status) + " " + c.Reason + ": " + c.Message
				}
			}
		}
		assert.Equal(t, "False Unschedulable: 0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector. preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling.", msgs["selector"])
		assert.Equal(t, "False Unschedulable: 0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.", msgs["cpu"])
		assert.Equal(t, "True : ", msgs["taint"], "the lone control plane is not tainted")

		// The Node gets the label: the Pod that waits for it is bound at once, no retry waited.
		var node corev1.Node
		r.update(cache.Key{Resource: "nodes", Name: "opemu-control-plane"}, &node, func() { node.Labels["disk"] = "ssd" })
		synctest.Wait()
		var p corev1.Pod
		r.get(cache.Key{Resource: "pods", Namespace: "default", Name: "selector"}, &p)
		assert.Equal(t, "opemu-control-plane", p.Spec.NodeName)
	})
}

func resourceQuantity(s string) *resource.Quantity { q := resource.MustParse(s); return &q }
