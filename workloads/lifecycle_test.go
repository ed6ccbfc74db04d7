package workloads_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/nodes"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func nodeKey(name string) cache.Key { return cache.Key{Resource: "nodes", Name: name} }

// setKubelet writes the Node's KubeletAnnotation ("": removed), as `kubectl annotate` would.
func (r *rig) setKubelet(name, state string) {
	r.t.Helper()
	var n corev1.Node
	r.update(nodeKey(name), &n, func() {
		if state == "" {
			delete(n.Annotations, nodes.KubeletAnnotation)
			return
		}
		n.Annotations[nodes.KubeletAnnotation] = state
	})
}

func (r *rig) node(name string) corev1.Node {
	r.t.Helper()
	var n corev1.Node
	r.get(nodeKey(name), &n)
	return n
}

func nodeReady(n corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// taintKeys are the Node's taints as key:effect.
func taintKeys(n corev1.Node) []string {
	var out []string
	for _, t := range n.Spec.Taints {
		out = append(out, t.Key+":"+string(t.Effect))
	}
	slices.Sort(out)
	return out
}

func podReady(p corev1.Pod) corev1.ConditionStatus {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return ""
}

// webReplicaSet makes the ReplicaSet web of n Pods and lets them run.
func (r *rig) webReplicaSet(n int32) {
	r.t.Helper()
	r.create(rsKey("web"), &appsv1.ReplicaSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To(n), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podTemplate("nginx:1.27")},
	})
	synctest.Wait()
	tick()
}

// TestNodeStoppedKubelet: a Node whose kubelet stops is found unreachable by the node
// lifecycle controller once its heartbeat is 50 s old (conditions Unknown, the unreachable
// taints), its Pods become not ready, and 300 s later (the tolerations every Pod is given)
// they are evicted: marked for deletion with DisruptionTarget, and, the kubelet being stopped,
// left Terminating while their ReplicaSet replaces them on another Node. The kubelet started
// again takes the taints off and finishes the deletions.
func TestNodeStoppedKubelet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newClusterOf(t, 3)
		defer r.stop()
		r.webReplicaSet(2)
		before := r.pods()
		require.Len(t, before, 2)
		for _, p := range before {
			require.Equal(t, "opemu-worker", p.Spec.NodeName, "the first Node that fits")
			require.Equal(t, corev1.ConditionTrue, podReady(p))
		}

		r.setKubelet("opemu-worker", nodes.KubeletStopped)
		synctest.Wait()
		time.Sleep(35 * time.Second)
		synctest.Wait()
		assert.Equal(t, corev1.ConditionTrue, nodeReady(r.node("opemu-worker")).Status, "not yet 50 s without a heartbeat")

		time.Sleep(30 * time.Second)
		synctest.Wait()
		w := r.node("opemu-worker")
		ready := nodeReady(w)
		assert.Equal(t, corev1.ConditionUnknown, ready.Status)
		assert.Equal(t, "NodeStatusUnknown", ready.Reason)
		assert.Equal(t, "Kubelet stopped posting node status.", ready.Message)
		assert.Equal(t, []string{"node.kubernetes.io/unreachable:NoExecute", "node.kubernetes.io/unreachable:NoSchedule"}, taintKeys(w))
		for _, tn := range w.Spec.Taints {
			if tn.Effect == corev1.TaintEffectNoExecute {
				assert.NotNil(t, tn.TimeAdded)
			}
		}
		assert.Equal(t, corev1.ConditionTrue, nodeReady(r.node("opemu-worker2")).Status, "its kubelet beats")
		assert.Empty(t, taintKeys(r.node("opemu-worker2")))
		for _, p := range r.pods() {
			assert.Equal(t, corev1.ConditionFalse, podReady(p), p.Name)
			assert.Nil(t, p.DeletionTimestamp, "tolerated for 300 s")
		}
		var rs appsv1.ReplicaSet
		r.get(rsKey("web"), &rs)
		assert.Zero(t, rs.Status.ReadyReplicas)
		assert.Equal(t, []string{"Node opemu-worker status is now: NodeNotReady"}, r.events.messages("NodeNotReady")[:1])

		time.Sleep(280 * time.Second) // 346 s in, 296 s after the taint
		synctest.Wait()
		assert.Len(t, r.pods(), 2, "not yet 300 s")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		tick()
		var evicted, replacements []string
		for _, p := range r.pods() {
			if p.DeletionTimestamp != nil {
				evicted = append(evicted, p.Name)
				assert.Equal(t, "opemu-worker", p.Spec.NodeName)
				c := findPodCondition(p, corev1.DisruptionTarget)
				assert.Equal(t, "DeletionByTaintManager", c.Reason)
				continue
			}
			replacements = append(replacements, p.Name)
			assert.Equal(t, "opemu-worker2", p.Spec.NodeName, "the unreachable Node takes no new Pod")
			assert.Equal(t, corev1.ConditionTrue, podReady(p))
		}
		assert.Len(t, evicted, 2, "Terminating: their kubelet is stopped")
		assert.Len(t, replacements, 2)
		assert.Len(t, r.events.messages("TaintManagerEviction"), 2)

		r.setKubelet("opemu-worker", "")
		time.Sleep(nodes.RenewInterval) // its next beat
		synctest.Wait()
		tick()
		w = r.node("opemu-worker")
		assert.Equal(t, corev1.ConditionTrue, nodeReady(w).Status)
		assert.Empty(t, taintKeys(w))
		var left []string
		for _, p := range r.pods() {
			left = append(left, p.Name)
		}
		assert.ElementsMatch(t, replacements, left, "the kubelet finished the evicted Pods' deletion")
	})
}

func findPodCondition(p corev1.Pod, typ corev1.PodConditionType) corev1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return c
		}
	}
	return corev1.PodCondition{}
}

// TestNodeNotReadyAndDeleted: a kubelet reporting Ready=False gets the not-ready taints at
// once; a Pod tolerating them for 10 s is evicted then, one tolerating them for ever stays, and
// the deletion of the Node takes the Pods left on it 40 s later (pod GC), marked Failed.
func TestNodeNotReadyAndDeleted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newClusterOf(t, 2)
		defer r.stop()
		pod := func(name string, seconds *int64) {
			r.create(cache.Key{Resource: "pods", Namespace: "default"}, &corev1.Pod{
				TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}, Tolerations: []corev1.Toleration{
					{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: seconds}}},
			})
		}
		pod("brief", ptr.To[int64](10))
		pod("stays", nil)
		synctest.Wait()
		tick()

		r.setKubelet("opemu-worker", nodes.KubeletNotReady)
		time.Sleep(nodes.RenewInterval) // the kubelet's next report
		synctest.Wait()
		w := r.node("opemu-worker")
		assert.Equal(t, corev1.ConditionFalse, nodeReady(w).Status)
		assert.Equal(t, "KubeletNotReady", nodeReady(w).Reason)
		assert.Equal(t, []string{"node.kubernetes.io/not-ready:NoExecute", "node.kubernetes.io/not-ready:NoSchedule"}, taintKeys(w))

		time.Sleep(10 * time.Second)
		synctest.Wait()
		var brief, stays corev1.Pod
		r.get(cache.Key{Resource: "pods", Namespace: "default", Name: "brief"}, &brief)
		r.get(cache.Key{Resource: "pods", Namespace: "default", Name: "stays"}, &stays)
		assert.NotNil(t, brief.DeletionTimestamp, "evicted after its 10 s")
		assert.Nil(t, stays.DeletionTimestamp)
		assert.Equal(t, corev1.ConditionFalse, podReady(stays))

		_, _, err := r.client.Delete(ctx, nodeKey("opemu-worker"), cache.Preconditions{})
		require.NoError(t, err)
		synctest.Wait()
		time.Sleep(39 * time.Second)
		synctest.Wait()
		assert.Len(t, r.pods(), 2, "quarantined 40 s")
		time.Sleep(2 * time.Second)
		synctest.Wait()
		assert.Empty(t, r.pods(), "the pod GC deleted the Pods of the Node gone")
	})
}
