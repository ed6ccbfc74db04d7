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
	"k8s.io/utils/ptr"
)

// TestReplicaSetAdoptsAndReleases: a ReplicaSet adopts the orphan Pod its selector selects (a
// controller reference added, counted in its replicas), and releases a Pod relabelled out of
// it (the reference removed, the Pod kept, a replacement made), as kube's ControllerRefManager.
func TestReplicaSetAdoptsAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		r.create(cache.Key{Resource: "pods", Namespace: "default"}, &corev1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: "stray", Labels: map[string]string{"app": "web"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
		})
		synctest.Wait()
		r.webReplicaSet(2)
		var rs appsv1.ReplicaSet
		r.get(rsKey("web"), &rs)
		var stray corev1.Pod
		r.get(podKey("stray"), &stray)
		ref := metav1.GetControllerOf(&stray)
		require.NotNil(t, ref, "adopted")
		assert.Equal(t, rs.UID, ref.UID)
		assert.True(t, *ref.BlockOwnerDeletion)
		assert.Len(t, r.pods(), 2, "the orphan counts as one of the two")
		tick() // the adoption is a write: the kubelet's Stage delay starts again, as in kwok
		r.get(rsKey("web"), &rs)
		assert.Equal(t, int32(2), rs.Status.ReadyReplicas)

		r.update(podKey("stray"), &stray, func() { stray.Labels["app"] = "debug" })
		synctest.Wait()
		tick()
		r.get(podKey("stray"), &stray)
		assert.Nil(t, metav1.GetControllerOf(&stray), "released")
		assert.Len(t, r.pods(), 3, "kept, and replaced")
		assert.Len(t, r.podNames("app=web"), 2)
		r.get(rsKey("web"), &rs)
		assert.Equal(t, int32(2), rs.Status.Replicas)

		// Selected again, it is adopted again and the surplus is deleted.
		r.update(podKey("stray"), &stray, func() { stray.Labels["app"] = "web" })
		synctest.Wait()
		tick()
		assert.Len(t, r.podNames("app=web"), 2)
		r.get(rsKey("web"), &rs)
		assert.Equal(t, int32(2), rs.Status.Replicas)
	})
}

// TestDeploymentAdoptsReplicaSet: a Deployment adopts the orphan ReplicaSet its selector
// selects (left by a delete with --cascade=orphan, say) instead of making another for the same
// template.
func TestDeploymentAdoptsReplicaSet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		d := &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: podTemplate("nginx:1.27")},
		}
		r.create(deployKey("web"), d)
		synctest.Wait()
		tick()
		rsNames := func() []string {
			l, err := r.client.List(ctx, cache.GroupResource{Group: "apps", Resource: "replicasets"}, cache.InNamespace("default"))
			require.NoError(t, err)
			var out []string
			for _, o := range l.Items {
				out = append(out, o.Key().Name)
			}
			return out
		}
		before := rsNames()
		require.Len(t, before, 1)
		// Orphan it as the collector does for --cascade=orphan: the owner goes (this rig has no
		// collector, so nothing is deleted with it), then its reference. Removing the reference
		// while the owner lives would race the owner's own pass, which adopts it back.
		_, _, err := r.client.Delete(ctx, deployKey("web"), cache.Preconditions{})
		require.NoError(t, err)
		synctest.Wait()
		var rs appsv1.ReplicaSet
		r.update(rsKey(before[0]), &rs, func() { rs.OwnerReferences = nil })
		synctest.Wait()
		r.create(deployKey("web"), &appsv1.Deployment{TypeMeta: d.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: d.Spec})
		synctest.Wait()
		tick()
		assert.Equal(t, before, rsNames(), "the same ReplicaSet, adopted")
		var nd appsv1.Deployment
		r.get(deployKey("web"), &nd)
		r.get(rsKey(before[0]), &rs)
		ref := metav1.GetControllerOf(&rs)
		require.NotNil(t, ref)
		assert.Equal(t, nd.UID, ref.UID)
		assert.Len(t, r.pods(), 2, "its Pods kept")
		assert.Equal(t, int32(2), nd.Status.AvailableReplicas)
	})
}
