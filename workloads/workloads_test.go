package workloads_test

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/opemu/opemu/workloads"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

var ctx = context.Background()

// recorder keeps Events in memory.
type recorder struct {
	mu  sync.Mutex
	evs []events.Event
}

func (r *recorder) Record(_ context.Context, ev events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *recorder) messages(reason string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		if e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// rig is the write path and one running workload controller, inside a synctest bubble.
type rig struct {
	t      *testing.T
	client *registry.Client
	events *recorder
	stop   func()
}

func newRig(t *testing.T, gr cache.GroupResource, newReconciler func(workloads.Config) reconciler.Reconciler) *rig {
	t.Helper()
	env := registrytest.New(t, registrytest.Options{})
	rec := &recorder{}
	r := newReconciler(workloads.Config{Client: env.Registry.Client("workloads"), Events: rec, RolloutStep: time.Second, JobDuration: time.Second})
	ctrl, err := reconciler.New(reconciler.Config{Store: env.Storage, Resource: gr, Reconciler: r, Name: gr.Resource})
	require.NoError(t, err)
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { _ = ctrl.Run(cctx); close(done) }()
	return &rig{t: t, client: env.Registry.Client("test"), events: rec, stop: func() {
		cancel()
		<-done
		env.Storage.Close()
	}}
}

// create stores a typed object.
func (r *rig) create(key cache.Key, obj any) {
	r.t.Helper()
	raw, err := json.Marshal(obj)
	require.NoError(r.t, err)
	m, err := cache.DecodeJSON(raw)
	require.NoError(r.t, err)
	_, err = r.client.Create(ctx, key, m)
	require.NoError(r.t, err)
}

// get decodes the stored object at key into v (made zero first: omitted fields are zero) and
// returns its resourceVersion.
func (r *rig) get(key cache.Key, v any) uint64 {
	r.t.Helper()
	o, err := r.client.Get(ctx, key)
	require.NoError(r.t, err)
	reflect.ValueOf(v).Elem().SetZero()
	require.NoError(r.t, json.Unmarshal(o.Raw(), v))
	return o.ResourceVersion()
}

// update reads key into v, applies fn and stores it.
func (r *rig) update(key cache.Key, v any, fn func()) {
	r.t.Helper()
	r.get(key, v)
	fn()
	raw, err := json.Marshal(v)
	require.NoError(r.t, err)
	m, err := cache.DecodeJSON(raw)
	require.NoError(r.t, err)
	_, err = r.client.Update(ctx, key, m)
	require.NoError(r.t, err)
}

// tick lets one virtual second pass and the controller act on it.
func tick() {
	time.Sleep(time.Second)
	synctest.Wait()
}

func podTemplate(image string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
}

func deployKey(name string) cache.Key {
	return cache.Key{Group: "apps", Resource: "deployments", Namespace: "default", Name: name}
}

// counts are a Deployment's status counts: replicas, updated, ready, available.
func counts(d appsv1.Deployment) [4]int32 {
	return [4]int32{d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas, d.Status.AvailableReplicas}
}

func condition(d appsv1.Deployment, t appsv1.DeploymentConditionType) appsv1.DeploymentCondition {
	for _, c := range d.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return appsv1.DeploymentCondition{}
}

func stsKey(name string) cache.Key {
	return cache.Key{Group: "apps", Resource: "statefulsets", Namespace: "default", Name: name}
}

// TestStatefulSetRollout: the fields kube's StatefulSet controller sets, a rolling update to a
// new revision and one held by a partition.
func TestStatefulSetRollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, workloads.StatefulSetResource, func(c workloads.Config) reconciler.Reconciler { return workloads.NewStatefulSets(c) })
		defer r.stop()
		key := stsKey("db")
		r.create(key, &appsv1.StatefulSet{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
			ObjectMeta: metav1.ObjectMeta{Name: "db"},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: podTemplate("postgres:16"), ServiceName: "db"},
		})
		synctest.Wait()
		var s appsv1.StatefulSet
		r.get(key, &s)
		assert.Equal(t, s.Generation, s.Status.ObservedGeneration)
		assert.Equal(t, int32(3), s.Status.Replicas)
		assert.Zero(t, s.Status.ReadyReplicas)
		rev := s.Status.UpdateRevision
		assert.Regexp(t, `^db-[a-z0-9]+$`, rev)
		assert.Equal(t, rev, s.Status.CurrentRevision)
		assert.Empty(t, s.Status.Conditions, "kube's StatefulSet controller sets no conditions")
		for range 3 {
			tick()
		}
		r.get(key, &s)
		assert.Equal(t, [4]int32{3, 3, 3, 3}, [4]int32{s.Status.ReadyReplicas, s.Status.AvailableReplicas, s.Status.CurrentReplicas, s.Status.UpdatedReplicas})

		r.update(key, &s, func() { s.Spec.Template.Spec.Containers[0].Image = "postgres:17" })
		synctest.Wait()
		r.get(key, &s)
		assert.NotEqual(t, rev, s.Status.UpdateRevision)
		assert.Equal(t, rev, s.Status.CurrentRevision)
		assert.Zero(t, s.Status.UpdatedReplicas)
		for range 3 {
			tick()
		}
		r.get(key, &s)
		assert.Equal(t, int32(3), s.Status.UpdatedReplicas)
		assert.Equal(t, s.Status.UpdateRevision, s.Status.CurrentRevision, "every pod updated: the update revision is current")
		assert.Equal(t, int32(3), s.Status.CurrentReplicas)

		// A partition of 2 updates one pod only (ordinal 2), and the revision stays.
		current := s.Status.CurrentRevision
		r.update(key, &s, func() {
			s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](2)}
			s.Spec.Template.Spec.Containers[0].Image = "postgres:18"
		})
		synctest.Wait()
		for range 3 {
			tick()
		}
		r.get(key, &s)
		assert.Equal(t, int32(1), s.Status.UpdatedReplicas)
		assert.Equal(t, current, s.Status.CurrentRevision)
		assert.Equal(t, int32(2), s.Status.CurrentReplicas)
	})
}

func jobKey(name string) cache.Key {
	return cache.Key{Group: "batch", Resource: "jobs", Namespace: "default", Name: name}
}

func job(name string, completions, parallelism int32, suspend bool) *batchv1.Job {
	tpl := podTemplate("busybox:1.36")
	tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		// No selector: the Job's is generated, as kube-apiserver generates it (manualSelector unset).
		Spec: batchv1.JobSpec{Completions: ptr.To(completions), Parallelism: ptr.To(parallelism), Suspend: ptr.To(suspend), Template: tpl},
	}
}

func jobCondition(j batchv1.Job, t batchv1.JobConditionType) batchv1.JobCondition {
	for _, c := range j.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return batchv1.JobCondition{}
}

// TestJobCompletes: waves of parallelism pods, each JobDuration long, until completions.
func TestJobCompletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, workloads.JobResource, func(c workloads.Config) reconciler.Reconciler { return workloads.NewJobs(c) })
		defer r.stop()
		key := jobKey("batch")
		r.create(key, job("batch", 3, 2, false))
		synctest.Wait()
		var j batchv1.Job
		r.get(key, &j)
		require.NotNil(t, j.Status.StartTime)
		start := j.Status.StartTime.Time
		assert.Equal(t, int32(2), j.Status.Active)
		assert.Equal(t, ptr.To[int32](2), j.Status.Ready)
		assert.Zero(t, j.Status.Succeeded)
		assert.Empty(t, j.Status.Conditions)

		tick()
		r.get(key, &j)
		assert.Equal(t, int32(2), j.Status.Succeeded, "the first wave succeeded")
		assert.Equal(t, int32(1), j.Status.Active)
		assert.Nil(t, j.Status.CompletionTime)

		tick()
		rv := r.get(key, &j)
		assert.Equal(t, int32(3), j.Status.Succeeded)
		assert.Zero(t, j.Status.Active)
		require.NotNil(t, j.Status.CompletionTime)
		assert.Equal(t, 2*time.Second, j.Status.CompletionTime.Sub(start))
		for _, ct := range []batchv1.JobConditionType{batchv1.JobSuccessCriteriaMet, batchv1.JobComplete} {
			c := jobCondition(j, ct)
			assert.Equal(t, corev1.ConditionTrue, c.Status, ct)
			assert.Equal(t, "CompletionsReached", c.Reason)
			assert.Equal(t, "Reached expected number of succeeded pods", c.Message)
		}
		assert.Equal(t, []string{"Job completed"}, r.events.messages("Completed"))
		tick()
		assert.Equal(t, rv, r.get(key, &j), "a complete Job is not written again")
	})
}

// TestJobSuspended: a suspended Job does not start; resumed, it starts then.
func TestJobSuspended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, workloads.JobResource, func(c workloads.Config) reconciler.Reconciler { return workloads.NewJobs(c) })
		defer r.stop()
		key := jobKey("later")
		r.create(key, job("later", 1, 1, true))
		synctest.Wait()
		tick()
		var j batchv1.Job
		r.get(key, &j)
		assert.Nil(t, j.Status.StartTime)
		assert.Equal(t, corev1.ConditionTrue, jobCondition(j, batchv1.JobSuspended).Status)
		assert.Equal(t, "JobSuspended", jobCondition(j, batchv1.JobSuspended).Reason)

		r.update(key, &j, func() { j.Spec.Suspend = ptr.To(false) })
		synctest.Wait()
		r.get(key, &j)
		require.NotNil(t, j.Status.StartTime)
		assert.Equal(t, corev1.ConditionFalse, jobCondition(j, batchv1.JobSuspended).Status)
		assert.Equal(t, "JobResumed", jobCondition(j, batchv1.JobSuspended).Reason)
		tick()
		r.get(key, &j)
		assert.Equal(t, corev1.ConditionTrue, jobCondition(j, batchv1.JobComplete).Status)
		assert.Equal(t, int32(1), j.Status.Succeeded)
	})
}
