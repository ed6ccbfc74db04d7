package workloads_test

import (
	"testing"
	"testing/synctest"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/workloads"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// replicaSets lists the ReplicaSets of namespace default by name.
func (r *rig) replicaSets() map[string]appsv1.ReplicaSet {
	r.t.Helper()
	l, err := r.client.List(ctx, workloads.ReplicaSetResource, cache.InNamespace("default"))
	require.NoError(r.t, err)
	out := map[string]appsv1.ReplicaSet{}
	for _, o := range l.Items {
		var rs appsv1.ReplicaSet
		r.get(o.Key(), &rs)
		out[rs.Name] = rs
	}
	return out
}

func newDeployment(name string, replicas int32, image string) *appsv1.Deployment {
	return &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: podTemplate(image)},
	}
}

// TestDeploymentRollout follows a Deployment through its first rollout, a rolling update
// (maxSurge and maxUnavailable held at every step), an undo, revision history and a scale
// down, one virtual second per Pod start.
func TestDeploymentRollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		key := deployKey("web")
		r.create(key, newDeployment("web", 3, "nginx:1.27"))
		synctest.Wait()
		var d appsv1.Deployment
		r.get(key, &d)
		hash := workloads.PodTemplateHash(&d.Spec.Template, nil)
		first := "web-" + hash
		rss := r.replicaSets()
		require.Contains(t, rss, first, "named <deployment>-<pod-template-hash>")
		rs := rss[first]
		assert.Equal(t, hash, rs.Labels[appsv1.DefaultDeploymentUniqueLabelKey])
		assert.Equal(t, hash, rs.Spec.Selector.MatchLabels[appsv1.DefaultDeploymentUniqueLabelKey])
		assert.Equal(t, "1", rs.Annotations[workloads.RevisionAnnotation])
		assert.Equal(t, "1", d.Annotations[workloads.RevisionAnnotation])
		assert.Equal(t, d.UID, metav1.GetControllerOf(&rs).UID)
		assert.Equal(t, [4]int32{3, 3, 0, 0}, counts(d), "three Pods bound, none running yet")
		assert.Equal(t, "MinimumReplicasUnavailable", condition(d, appsv1.DeploymentAvailable).Reason)
		assert.Equal(t, `ReplicaSet "`+first+`" is progressing.`, condition(d, appsv1.DeploymentProgressing).Message,
			"NewReplicaSetCreated, then ReplicaSetUpdated once its Pods are counted")
		assert.Equal(t, []string{"Scaled up replica set " + first + " from 0 to 3"}, r.events.messages("ScalingReplicaSet"))

		tick()
		rv := r.get(key, &d)
		assert.Equal(t, [4]int32{3, 3, 3, 3}, counts(d))
		assert.Equal(t, "MinimumReplicasAvailable", condition(d, appsv1.DeploymentAvailable).Reason)
		assert.Equal(t, `ReplicaSet "`+first+`" has successfully progressed.`, condition(d, appsv1.DeploymentProgressing).Message)
		tick()
		assert.Equal(t, rv, r.get(key, &d), "a rolled-out Deployment is not written again")

		// A new template: 25% of 3 is one Pod of surge and none unavailable.
		r.update(key, &d, func() { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28" })
		synctest.Wait()
		var second string
		for range 10 {
			r.get(key, &d)
			assert.GreaterOrEqual(t, d.Status.AvailableReplicas, int32(3), "maxUnavailable 0")
			total := int32(0)
			for name, rs := range r.replicaSets() {
				total += *rs.Spec.Replicas
				if name != first {
					second = name
				}
			}
			assert.LessOrEqual(t, total, int32(4), "maxSurge 1")
			if condition(d, appsv1.DeploymentProgressing).Reason == "NewReplicaSetAvailable" && d.Status.Replicas == 3 {
				break
			}
			tick()
		}
		require.NotEmpty(t, second)
		rss = r.replicaSets()
		assert.Equal(t, int32(0), *rss[first].Spec.Replicas, "the old ReplicaSet is kept, scaled to 0")
		assert.Equal(t, int32(3), rss[second].Status.ReadyReplicas)
		assert.Equal(t, "2", rss[second].Annotations[workloads.RevisionAnnotation])
		assert.Equal(t, "2", d.Annotations[workloads.RevisionAnnotation])
		assert.Equal(t, [4]int32{3, 3, 3, 3}, counts(d))
		for _, p := range r.pods() {
			assert.Equal(t, "nginx:1.28", p.Spec.Containers[0].Image)
		}

		// kubectl rollout undo puts the first template back: its ReplicaSet is the new one
		// again, at revision 3, with revision 1 in its history.
		r.update(key, &d, func() { d.Spec.Template.Spec.Containers[0].Image = "nginx:1.27" })
		for range 10 {
			tick()
			if r.get(key, &d); condition(d, appsv1.DeploymentProgressing).Reason == "NewReplicaSetAvailable" && d.Status.Replicas == 3 {
				break
			}
		}
		rss = r.replicaSets()
		assert.Len(t, rss, 2, "no third ReplicaSet")
		assert.Equal(t, "3", rss[first].Annotations[workloads.RevisionAnnotation])
		assert.Equal(t, "1", rss[first].Annotations[workloads.RevisionHistoryAnnotation])
		assert.Equal(t, int32(3), *rss[first].Spec.Replicas)
		assert.Equal(t, "3", d.Annotations[workloads.RevisionAnnotation])

		// A revisionHistoryLimit of 0 keeps no old ReplicaSet once rolled out.
		r.update(key, &d, func() { d.Spec.RevisionHistoryLimit = ptr.To[int32](0) })
		synctest.Wait()
		assert.Len(t, r.replicaSets(), 1)

		// Scale down: at once.
		r.update(key, &d, func() { d.Spec.Replicas = ptr.To[int32](1) })
		synctest.Wait()
		r.get(key, &d)
		assert.Equal(t, [4]int32{1, 1, 1, 1}, counts(d))
		assert.Len(t, r.pods(), 1)
		msgs := r.events.messages("ScalingReplicaSet")
		assert.Equal(t, "Scaled down replica set "+first+" from 3 to 1", msgs[len(msgs)-1])
	})
}

// TestDeploymentRecreate: with the Recreate strategy a new template takes the old Pods down
// first, and makes the new ReplicaSet once they are gone.
func TestDeploymentRecreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		key := deployKey("db")
		dep := newDeployment("db", 2, "postgres:16")
		dep.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType}
		r.create(key, dep)
		synctest.Wait()
		tick()
		var d appsv1.Deployment
		r.get(key, &d)
		require.Equal(t, [4]int32{2, 2, 2, 2}, counts(d))
		r.update(key, &d, func() { d.Spec.Template.Spec.Containers[0].Image = "postgres:17" })
		synctest.Wait()
		r.get(key, &d)
		assert.Equal(t, [4]int32{2, 2, 0, 0}, counts(d), "the old Pods went, the new ones are bound")
		assert.Equal(t, corev1.ConditionFalse, condition(d, appsv1.DeploymentAvailable).Status, "Recreate allows no unavailable pod")
		msgs := r.events.messages("ScalingReplicaSet")
		require.Len(t, msgs, 3)
		assert.Regexp(t, `^Scaled down replica set db-[a-z0-9]+ from 2 to 0$`, msgs[1])
		assert.Regexp(t, `^Scaled up replica set db-[a-z0-9]+ from 0 to 2$`, msgs[2])
		tick()
		r.get(key, &d)
		assert.Equal(t, [4]int32{2, 2, 2, 2}, counts(d))
	})
}

// TestDeploymentPaused: a paused Deployment says so, scales but does not roll out a new
// template until resumed.
func TestDeploymentPaused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		key := deployKey("web")
		r.create(key, newDeployment("web", 2, "nginx:1.27"))
		synctest.Wait()
		tick()
		var d appsv1.Deployment
		r.update(key, &d, func() { d.Spec.Paused = true })
		synctest.Wait()
		r.get(key, &d)
		assert.Equal(t, "DeploymentPaused", condition(d, appsv1.DeploymentProgressing).Reason)
		assert.Equal(t, corev1.ConditionUnknown, condition(d, appsv1.DeploymentProgressing).Status)
		r.update(key, &d, func() {
			d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
			d.Spec.Replicas = ptr.To[int32](3)
		})
		synctest.Wait()
		tick()
		r.get(key, &d)
		assert.Len(t, r.replicaSets(), 1, "no new ReplicaSet while paused")
		assert.Equal(t, [4]int32{3, 0, 3, 3}, counts(d), "scaled, none updated")
		r.update(key, &d, func() { d.Spec.Paused = false })
		synctest.Wait()
		assert.Len(t, r.replicaSets(), 2, "resumed, the rollout starts")
		r.get(key, &d)
		assert.Equal(t, "ReplicaSetUpdated", condition(d, appsv1.DeploymentProgressing).Reason)
	})
}
