package workloads_test

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func stsKey(name string) cache.Key {
	return cache.Key{Group: "apps", Resource: "statefulsets", Namespace: "default", Name: name}
}

func podKey(name string) cache.Key {
	return cache.Key{Resource: "pods", Namespace: "default", Name: name}
}

func newStatefulSet(replicas int32, policy appsv1.PodManagementPolicyType) *appsv1.StatefulSet {
	t := podTemplate("postgres:16")
	t.Labels = map[string]string{"app": "db"}
	return &appsv1.StatefulSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{Name: "db"},
		Spec: appsv1.StatefulSetSpec{
			Replicas: ptr.To(replicas), ServiceName: "db", PodManagementPolicy: policy,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Template: t,
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
			}},
		},
	}
}

// TestStatefulSetScaleUp: OrderedReady makes one Pod at a time, each once the one before is
// Running and Ready; Parallel makes them all at once. Either way the Pods are <set>-<ordinal>
// with their identity, claim and revision, and the status counts them.
func TestStatefulSetScaleUp(t *testing.T) {
	for _, tc := range []struct {
		policy appsv1.PodManagementPolicyType
		// pods are the Pods there are after each virtual second.
		pods [][]string
	}{
		{appsv1.OrderedReadyPodManagement, [][]string{{"db-0"}, {"db-0", "db-1"}, {"db-0", "db-1", "db-2"}, {"db-0", "db-1", "db-2"}}},
		{appsv1.ParallelPodManagement, [][]string{{"db-0", "db-1", "db-2"}, {"db-0", "db-1", "db-2"}}},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newCluster(t)
				defer r.stop()
				r.create(stsKey("db"), newStatefulSet(3, tc.policy))
				synctest.Wait()
				for i, want := range tc.pods {
					if i > 0 {
						tick()
					}
					assert.Equal(t, want, r.podNames("app=db"), "after %d s", i)
				}
				var s appsv1.StatefulSet
				r.get(stsKey("db"), &s)
				st := s.Status
				assert.Equal(t, [5]int32{3, 3, 3, 3, 3}, [5]int32{st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.CurrentReplicas, st.UpdatedReplicas})
				assert.Equal(t, s.Generation, st.ObservedGeneration)
				assert.Regexp(t, `^db-[a-z0-9]+$`, st.CurrentRevision)
				assert.Equal(t, st.CurrentRevision, st.UpdateRevision)

				var rev appsv1.ControllerRevision
				r.get(cache.Key{Group: "apps", Resource: "controllerrevisions", Namespace: "default", Name: st.CurrentRevision}, &rev)
				assert.Equal(t, int64(1), rev.Revision)
				assert.Equal(t, strings.TrimPrefix(st.CurrentRevision, "db-"), rev.Labels["controller.kubernetes.io/hash"])
				assert.Equal(t, s.UID, metav1.GetControllerOf(&rev).UID)
				assert.Contains(t, string(rev.Data.Raw), `"$patch":"replace"`)

				var pod corev1.Pod
				r.get(podKey("db-1"), &pod)
				assert.Equal(t, map[string]string{"app": "db", "statefulset.kubernetes.io/pod-name": "db-1", "apps.kubernetes.io/pod-index": "1",
					"controller-revision-hash": st.CurrentRevision}, pod.Labels)
				assert.Equal(t, "db-1", pod.Spec.Hostname)
				assert.Equal(t, "db", pod.Spec.Subdomain)
				ref := metav1.GetControllerOf(&pod)
				require.NotNil(t, ref)
				assert.Equal(t, [3]string{"StatefulSet", "db", string(s.UID)}, [3]string{ref.Kind, ref.Name, string(ref.UID)})
				assert.True(t, *ref.BlockOwnerDeletion)
				require.NotEmpty(t, pod.Spec.Volumes)
				assert.Equal(t, "data", pod.Spec.Volumes[0].Name)
				assert.Equal(t, "data-db-1", pod.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
				var claim corev1.PersistentVolumeClaim
				r.get(cache.Key{Resource: "persistentvolumeclaims", Namespace: "default", Name: "data-db-1"}, &claim)
				assert.Equal(t, "db", claim.Labels["app"])
				assert.Contains(t, r.events.messages("SuccessfulCreate"), "create Pod db-2 in StatefulSet db successful")
				assert.Contains(t, r.events.messages("SuccessfulCreate"), "create Claim data-db-0 Pod db-0 in StatefulSet db success")
			})
		})
	}
}

// readyStatefulSet creates the StatefulSet db of three Pods, lets them all run and returns
// its key.
func (r *rig) readyStatefulSet() cache.Key {
	key := stsKey("db")
	r.create(key, newStatefulSet(3, appsv1.OrderedReadyPodManagement))
	synctest.Wait()
	for range 3 {
		tick()
	}
	return key
}

// TestStatefulSetRollingUpdate: a new template replaces the Pods from the highest ordinal
// down to the partition, one at a time; lowering the partition finishes the update, and the
// update revision becomes the current one.
func TestStatefulSetRollingUpdate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		key := r.readyStatefulSet()
		var s appsv1.StatefulSet
		r.get(key, &s)
		first := s.Status.CurrentRevision
		require.Equal(t, int32(3), s.Status.ReadyReplicas)

		r.update(key, &s, func() {
			s.Spec.Template.Spec.Containers[0].Image = "postgres:17"
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](1)}
		})
		revisions := func() map[string]string {
			out := map[string]string{}
			for _, name := range r.podNames("app=db") {
				var p corev1.Pod
				r.get(podKey(name), &p)
				out[name] = p.Spec.Containers[0].Image
			}
			return out
		}
		synctest.Wait()
		assert.Equal(t, map[string]string{"db-0": "postgres:16", "db-1": "postgres:16", "db-2": "postgres:17"}, revisions(), "db-2 made again at once")
		r.get(key, &s)
		second := s.Status.UpdateRevision
		assert.NotEqual(t, first, second)
		assert.Equal(t, first, s.Status.CurrentRevision)
		assert.Equal(t, int32(1), s.Status.UpdatedReplicas)
		tick() // db-2 ready: db-1 goes
		tick()
		assert.Equal(t, map[string]string{"db-0": "postgres:16", "db-1": "postgres:17", "db-2": "postgres:17"}, revisions())
		for range 3 {
			tick()
		}
		r.get(key, &s)
		assert.Equal(t, map[string]string{"db-0": "postgres:16", "db-1": "postgres:17", "db-2": "postgres:17"}, revisions(), "the partition holds db-0")
		assert.Equal(t, [3]int32{3, 1, 2}, [3]int32{s.Status.ReadyReplicas, s.Status.CurrentReplicas, s.Status.UpdatedReplicas})
		assert.Equal(t, first, s.Status.CurrentRevision)

		r.update(key, &s, func() { s.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To[int32](0) })
		synctest.Wait()
		tick()
		r.get(key, &s)
		assert.Equal(t, map[string]string{"db-0": "postgres:17", "db-1": "postgres:17", "db-2": "postgres:17"}, revisions())
		assert.Equal(t, [3]int32{3, 3, 3}, [3]int32{s.Status.ReadyReplicas, s.Status.CurrentReplicas, s.Status.UpdatedReplicas})
		assert.Equal(t, second, s.Status.CurrentRevision, "every Pod updated: the update revision is current")
		assert.Equal(t, second, s.Status.UpdateRevision)

		// Back to the first template (kubectl rollout undo): its revision comes back as number 3.
		r.update(key, &s, func() { s.Spec.Template.Spec.Containers[0].Image = "postgres:16" })
		synctest.Wait()
		r.get(key, &s)
		assert.Equal(t, first, s.Status.UpdateRevision)
		var rev appsv1.ControllerRevision
		r.get(cache.Key{Group: "apps", Resource: "controllerrevisions", Namespace: "default", Name: first}, &rev)
		assert.Equal(t, int64(3), rev.Revision)
	})
}

// TestStatefulSetScaleDown: Pods go from the highest ordinal, and a failed Pod is made again.
func TestStatefulSetScaleDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		key := r.readyStatefulSet()
		var before corev1.Pod
		r.get(podKey("db-1"), &before)
		r.setPodPhase("db-1", corev1.PodFailed)
		synctest.Wait()
		var after corev1.Pod
		r.get(podKey("db-1"), &after)
		assert.NotEqual(t, before.UID, after.UID, "the failed Pod was deleted and made again")
		tick()

		var s appsv1.StatefulSet
		r.update(key, &s, func() { s.Spec.Replicas = ptr.To[int32](1) })
		synctest.Wait()
		assert.Equal(t, []string{"db-0"}, r.podNames("app=db"))
		deletes := r.events.messages("SuccessfulDelete")
		i2 := slices.Index(deletes, "delete Pod db-2 in StatefulSet db successful")
		i1 := slices.Index(deletes, "delete Pod db-1 in StatefulSet db successful")
		require.GreaterOrEqual(t, i2, 0)
		assert.Greater(t, slices.Index(deletes[i2:], "delete Pod db-1 in StatefulSet db successful"), 0, "db-2 first, then db-1: %v", deletes)
		assert.GreaterOrEqual(t, i1, 0)
		r.get(key, &s)
		assert.Equal(t, [2]int32{1, 1}, [2]int32{s.Status.Replicas, s.Status.ReadyReplicas})
		var claim corev1.PersistentVolumeClaim
		r.get(cache.Key{Resource: "persistentvolumeclaims", Namespace: "default", Name: "data-db-2"}, &claim) // claims are retained
	})
}
