package workloads_test

import (
	"testing"
	"testing/synctest"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func dsKey(name string) cache.Key {
	return cache.Key{Group: "apps", Resource: "daemonsets", Namespace: "default", Name: name}
}

func newDaemonSet() *appsv1.DaemonSet {
	t := podTemplate("fluentd:1")
	t.Labels = map[string]string{"app": "agent"}
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Spec:       appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent"}}, Template: t},
	}
}

// agents maps each Node to the image of the DaemonSet's Pod on it (the Pods not being
// deleted).
func (r *rig) agents() map[string]string {
	r.t.Helper()
	out := map[string]string{}
	for _, name := range r.podNames("app=agent") {
		var p corev1.Pod
		r.get(podKey(name), &p)
		if p.DeletionTimestamp == nil {
			out[p.Spec.NodeName] = p.Spec.Containers[0].Image
		}
	}
	return out
}

// dsCounts are a DaemonSet's status counts: desired, current, ready, updated, available,
// misscheduled.
func dsCounts(d appsv1.DaemonSet) [6]int32 {
	s := d.Status
	return [6]int32{s.DesiredNumberScheduled, s.CurrentNumberScheduled, s.NumberReady, s.UpdatedNumberScheduled, s.NumberAvailable, s.NumberMisscheduled}
}

// TestDaemonSet: one Pod per Node that fits it (the tainted control plane does not, until the
// template tolerates its taint), pinned to its Node by node affinity; a rolling update one
// Node at a time; a Node's new label or taint adds or removes its Pod.
func TestDaemonSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newClusterOf(t, 3)
		defer r.stop()
		key := dsKey("agent")
		r.create(key, newDaemonSet())
		synctest.Wait()
		tick()
		assert.Equal(t, map[string]string{"opemu-worker": "fluentd:1", "opemu-worker2": "fluentd:1"}, r.agents(), "the control plane's NoSchedule taint keeps it out")
		var d appsv1.DaemonSet
		r.get(key, &d)
		assert.Equal(t, [6]int32{2, 2, 2, 2, 2, 0}, dsCounts(d))
		assert.Equal(t, d.Generation, d.Status.ObservedGeneration)

		names := r.podNames("app=agent")
		require.NotEmpty(t, names)
		var p corev1.Pod
		r.get(podKey(names[0]), &p)
		assert.Regexp(t, `^agent-[a-z0-9]{5}$`, p.Name)
		terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
		require.Len(t, terms, 1)
		assert.Equal(t, []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{p.Spec.NodeName}}}, terms[0].MatchFields)
		assert.Equal(t, "1", p.Labels["pod-template-generation"])
		hash := p.Labels["controller-revision-hash"]
		var rev appsv1.ControllerRevision
		r.get(cache.Key{Group: "apps", Resource: "controllerrevisions", Namespace: "default", Name: "agent-" + hash}, &rev)
		assert.Equal(t, int64(1), rev.Revision)
		assert.Contains(t, p.Spec.Tolerations, corev1.Toleration{Key: corev1.TaintNodeUnschedulable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule})
		ref := metav1.GetControllerOf(&p)
		require.NotNil(t, ref)
		assert.Equal(t, [3]string{"DaemonSet", "agent", string(d.UID)}, [3]string{ref.Kind, ref.Name, string(ref.UID)})

		// A new template that tolerates the control plane: the control plane gets its Pod, the
		// workers' Pods are replaced one at a time (maxUnavailable 1).
		r.update(key, &d, func() {
			d.Spec.Template.Spec.Containers[0].Image = "fluentd:2"
			d.Spec.Template.Spec.Tolerations = []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
		})
		synctest.Wait()
		agents := r.agents()
		assert.Equal(t, "fluentd:2", agents["opemu-control-plane"])
		old := 0
		for _, image := range agents {
			if image == "fluentd:1" {
				old++
			}
		}
		assert.Equal(t, 2, old, "no worker's Pod goes while the control plane's new one is unavailable")
		for range 4 {
			tick()
		}
		assert.Equal(t, map[string]string{"opemu-control-plane": "fluentd:2", "opemu-worker": "fluentd:2", "opemu-worker2": "fluentd:2"}, r.agents())
		r.get(key, &d)
		assert.Equal(t, [6]int32{3, 3, 3, 3, 3, 0}, dsCounts(d))

		// A nodeSelector the Nodes lack takes every Pod away; a label brings one back.
		r.update(key, &d, func() { d.Spec.Template.Spec.NodeSelector = map[string]string{"agent": "yes"} })
		synctest.Wait()
		assert.Empty(t, r.agents())
		var node corev1.Node
		r.update(cache.Key{Resource: "nodes", Name: "opemu-worker"}, &node, func() { node.Labels["agent"] = "yes" })
		synctest.Wait()
		assert.Equal(t, map[string]string{"opemu-worker": "fluentd:2"}, r.agents())

		// A NoExecute taint it does not tolerate takes it away.
		r.update(cache.Key{Resource: "nodes", Name: "opemu-worker"}, &node, func() {
			node.Spec.Taints = append(node.Spec.Taints, corev1.Taint{Key: "drain", Effect: corev1.TaintEffectNoExecute})
		})
		synctest.Wait()
		assert.Empty(t, r.agents())
		tick() // the kubelet takes the deleted Pod away once it is due
		assert.Empty(t, r.podNames("app=agent"))
		r.get(key, &d)
		assert.Equal(t, [6]int32{0, 0, 0, 0, 0, 0}, dsCounts(d))
	})
}
