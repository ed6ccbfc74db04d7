package workloads_test

import (
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func jobKey(name string) cache.Key {
	return cache.Key{Group: "batch", Resource: "jobs", Namespace: "default", Name: name}
}

func newJob(completions, parallelism, backoffLimit int32, mode batchv1.CompletionMode) *batchv1.Job {
	return &batchv1.Job{
		TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: "work"},
		Spec: batchv1.JobSpec{Completions: ptr.To(completions), Parallelism: ptr.To(parallelism), BackoffLimit: ptr.To(backoffLimit), CompletionMode: &mode,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}},
	}
}

// jobPods are the Job's Pods by phase, each sorted by name.
func (r *rig) jobPods() map[corev1.PodPhase][]string {
	r.t.Helper()
	out := map[corev1.PodPhase][]string{}
	for _, name := range r.podNames("batch.kubernetes.io/job-name=work") {
		var p corev1.Pod
		r.get(podKey(name), &p)
		out[p.Status.Phase] = append(out[p.Status.Phase], name)
	}
	return out
}

// conditions are a Job's conditions as type=reason.
func conditions(j batchv1.Job) []string {
	var out []string
	for _, c := range j.Status.Conditions {
		out = append(out, string(c.Type)+"="+c.Reason)
	}
	return out
}

// TestJob runs Jobs whose Pods the test finishes, as a test of kube's Job controller would,
// and checks what the controller makes of them at each step.
func TestJob(t *testing.T) {
	type step struct {
		// finish sets the phase of the Job's first n Pods that are not finished.
		finish corev1.PodPhase
		n      int
		// wait lets virtual time pass first (the backoff after a failure).
		wait time.Duration
		// then: the Job's active, succeeded, failed, ready and its conditions.
		active, succeeded, failed int32
		conditions                []string
		completedIndexes          string
	}
	for _, tc := range []struct {
		name  string
		job   *batchv1.Job
		steps []step
	}{{
		name: "completions",
		job:  newJob(3, 2, 6, batchv1.NonIndexedCompletion),
		steps: []step{
			{active: 2},
			{finish: corev1.PodSucceeded, n: 2, active: 1, succeeded: 2},
			{finish: corev1.PodSucceeded, n: 1, succeeded: 3, conditions: []string{"SuccessCriteriaMet=CompletionsReached", "Complete=CompletionsReached"}},
		},
	}, {
		name: "backoffLimit",
		job:  newJob(1, 1, 1, batchv1.NonIndexedCompletion),
		steps: []step{
			{active: 1},
			{finish: corev1.PodFailed, n: 1, failed: 1},    // the replacement waits 10 s
			{wait: 10 * time.Second, active: 1, failed: 1}, // then comes
			{finish: corev1.PodFailed, n: 1, failed: 2, conditions: []string{"FailureTarget=BackoffLimitExceeded", "Failed=BackoffLimitExceeded"}},
		},
	}, {
		name: "failure then success",
		job:  newJob(2, 2, 6, batchv1.NonIndexedCompletion),
		steps: []step{
			{active: 2},
			{finish: corev1.PodFailed, n: 1, active: 1, failed: 1},
			{finish: corev1.PodSucceeded, n: 1, active: 1, succeeded: 1, failed: 1}, // a success ends the backoff
			{finish: corev1.PodSucceeded, n: 1, succeeded: 2, failed: 1, conditions: []string{"SuccessCriteriaMet=CompletionsReached", "Complete=CompletionsReached"}},
		},
	}, {
		name: "indexed",
		job:  newJob(3, 2, 6, batchv1.IndexedCompletion),
		steps: []step{
			{active: 2},
			{finish: corev1.PodSucceeded, n: 1, active: 2, succeeded: 1, completedIndexes: "0"},
			{finish: corev1.PodSucceeded, n: 2, succeeded: 3, completedIndexes: "0-2", conditions: []string{"SuccessCriteriaMet=CompletionsReached", "Complete=CompletionsReached"}},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newCluster(t)
				defer r.stop()
				r.create(jobKey("work"), tc.job)
				synctest.Wait()
				tick() // the Pods run
				var j batchv1.Job
				for i, s := range tc.steps {
					time.Sleep(s.wait)
					var live []string
					for _, phase := range []corev1.PodPhase{corev1.PodPending, corev1.PodRunning} {
						live = append(live, r.jobPods()[phase]...)
					}
					slices.Sort(live)
					require.GreaterOrEqual(t, len(live), s.n, "step %d", i)
					for _, name := range live[:s.n] {
						r.setPodPhase(name, s.finish)
					}
					synctest.Wait()
					tick()
					r.get(jobKey("work"), &j)
					st := j.Status
					assert.Equal(t, [3]int32{s.active, s.succeeded, s.failed}, [3]int32{st.Active, st.Succeeded, st.Failed}, "step %d: active, succeeded, failed", i)
					assert.Equal(t, s.active, *st.Ready, "step %d: the active Pods run and are ready", i)
					assert.Equal(t, s.conditions, conditions(j), "step %d", i)
					assert.Equal(t, s.completedIndexes, st.CompletedIndexes, "step %d", i)
					assert.Empty(t, st.UncountedTerminatedPods.Succeeded, "step %d: every finished Pod counted", i)
					assert.Empty(t, st.UncountedTerminatedPods.Failed, "step %d", i)
				}
				require.NotNil(t, j.Status.StartTime)
				pods := r.podNames("batch.kubernetes.io/job-name=work")
				for _, name := range pods {
					var p corev1.Pod
					r.get(podKey(name), &p)
					ref := metav1.GetControllerOf(&p)
					require.NotNil(t, ref)
					assert.Equal(t, [3]string{"Job", "work", string(j.UID)}, [3]string{ref.Kind, ref.Name, string(ref.UID)})
					finished := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
					assert.Equal(t, !finished, slices.Contains(p.Finalizers, batchv1.JobTrackingFinalizer), "%s (%s): the tracking finalizer until counted", name, p.Status.Phase)
				}
				last := j.Status.Conditions[len(j.Status.Conditions)-1]
				switch last.Type {
				case batchv1.JobComplete:
					require.NotNil(t, j.Status.CompletionTime)
					assert.Equal(t, []string{"Job completed"}, r.events.messages("Completed"))
				case batchv1.JobFailed:
					assert.Nil(t, j.Status.CompletionTime)
					assert.Equal(t, []string{"Job has reached the specified backoff limit"}, r.events.messages("BackoffLimitExceeded"))
				}
			})
		})
	}
}

// TestJobIndexedPods: an Indexed Job's Pods carry their completion index, lowest first, and
// are named and hostnamed after it.
func TestJobIndexedPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		r.create(jobKey("work"), newJob(4, 3, 6, batchv1.IndexedCompletion))
		synctest.Wait()
		var indexes []string
		for _, name := range r.podNames("batch.kubernetes.io/job-name=work") {
			var p corev1.Pod
			r.get(podKey(name), &p)
			ix := p.Annotations[batchv1.JobCompletionIndexAnnotation]
			indexes = append(indexes, ix)
			assert.Equal(t, ix, p.Labels[batchv1.JobCompletionIndexAnnotation])
			assert.Regexp(t, `^work-`+ix+`-[a-z0-9]{5}$`, p.Name)
			assert.Equal(t, "work-"+ix, p.Spec.Hostname)
		}
		slices.Sort(indexes)
		assert.Equal(t, []string{"0", "1", "2"}, indexes)
	})
}

// TestJobSuspended: a suspended Job makes no Pod (condition Suspended); resumed, it starts.
func TestJobSuspended(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		job := newJob(1, 1, 6, batchv1.NonIndexedCompletion)
		job.Spec.Suspend = ptr.To(true)
		r.create(jobKey("work"), job)
		synctest.Wait()
		var j batchv1.Job
		r.get(jobKey("work"), &j)
		assert.Empty(t, r.podNames("batch.kubernetes.io/job-name=work"))
		assert.Equal(t, []string{"Suspended=JobSuspended"}, conditions(j))
		assert.Nil(t, j.Status.StartTime)

		r.update(jobKey("work"), &j, func() { j.Spec.Suspend = ptr.To(false) })
		synctest.Wait()
		r.get(jobKey("work"), &j)
		assert.Len(t, r.podNames("batch.kubernetes.io/job-name=work"), 1)
		assert.Equal(t, []string{"Suspended=JobResumed"}, conditions(j))
		assert.NotNil(t, j.Status.StartTime)
		assert.Equal(t, []string{"Job resumed"}, r.events.messages("Resumed"))
	})
}

// TestJobDeletedReleasesPods: a Job being deleted lets its Pods go (their tracking finalizer
// off), so that the collector can delete them.
func TestJobDeletedReleasesPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		r.create(jobKey("work"), newJob(2, 2, 6, batchv1.NonIndexedCompletion))
		synctest.Wait()
		pods := r.podNames("batch.kubernetes.io/job-name=work")
		require.Len(t, pods, 2)
		finalizers := func() (n int) {
			for _, name := range pods {
				var p corev1.Pod
				r.get(podKey(name), &p)
				n += len(p.Finalizers)
			}
			return n
		}
		require.Equal(t, 2, finalizers())
		_, _, err := r.client.Delete(ctx, jobKey("work"), cache.Preconditions{})
		require.NoError(t, err)
		synctest.Wait()
		assert.Zero(t, finalizers(), "the Job's deletion releases its Pods")
	})
}
