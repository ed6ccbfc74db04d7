package workloads_test

import (
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

func cronJobKey(name string) cache.Key {
	return cache.Key{Group: "batch", Resource: "cronjobs", Namespace: "default", Name: name}
}

// jobNames are the names of the Jobs of namespace default, sorted.
func (r *rig) jobNames() []string {
	r.t.Helper()
	l, err := r.client.List(ctx, cache.GroupResource{Group: "batch", Resource: "jobs"}, cache.InNamespace("default"))
	require.NoError(r.t, err)
	out := []string{}
	for _, o := range l.Items {
		out = append(out, o.Key().Name)
	}
	return out
}

// succeed makes the Pods of the Job name succeed, as their kubelet would.
func (r *rig) succeed(job string) {
	r.t.Helper()
	names := r.podNames("job-name=" + job)
	require.NotEmpty(r.t, names, job)
	for _, p := range names {
		r.setPodPhase(p, corev1.PodSucceeded)
	}
	synctest.Wait()
}

// TestCronJob: a CronJob makes a Job at each minute of its schedule (named by the scheduled
// minute, with the scheduled-timestamp annotation), keeps status.active and lastScheduleTime,
// skips a schedule while a Job runs under Forbid, records lastSuccessfulTime, deletes the
// successful Jobs beyond its history limit, and makes none while suspended.
func TestCronJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		start := time.Now()       // 2000-01-01T00:00:00Z in the bubble
		at := func(minutes int) { // a second after the minute (kube's requeue pads 100 ms)
			time.Sleep(time.Until(start.Add(time.Duration(minutes)*time.Minute + time.Second)))
			synctest.Wait()
		}
		key := cronJobKey("tick")
		r.create(key, &batchv1.CronJob{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
			ObjectMeta: metav1.ObjectMeta{Name: "tick"},
			Spec: batchv1.CronJobSpec{Schedule: "* * * * *", ConcurrencyPolicy: batchv1.ForbidConcurrent, SuccessfulJobsHistoryLimit: ptr.To[int32](1),
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}},
		})
		synctest.Wait()
		assert.Empty(t, r.jobNames(), "nothing before the first minute")

		at(1)
		first := "tick-15778081" // 2000-01-01T00:01:00Z in minutes since the epoch
		require.Equal(t, []string{first}, r.jobNames())
		var job batchv1.Job
		r.get(cache.Key{Group: "batch", Resource: "jobs", Namespace: "default", Name: first}, &job)
		assert.Equal(t, "2000-01-01T00:01:00Z", job.Annotations[batchv1.CronJobScheduledTimestampAnnotation])
		ref := metav1.GetControllerOf(&job)
		require.NotNil(t, ref)
		assert.Equal(t, "CronJob", ref.Kind)
		var cj batchv1.CronJob
		r.get(key, &cj)
		require.Len(t, cj.Status.Active, 1)
		assert.Equal(t, first, cj.Status.Active[0].Name)
		assert.True(t, cj.Status.LastScheduleTime.Time.Equal(start.Add(time.Minute)))
		assert.Contains(t, r.events.messages("SuccessfulCreate"), "Created job "+first)

		at(2)
		assert.Equal(t, []string{first}, r.jobNames(), "Forbid: the first still runs")
		assert.NotEmpty(t, r.events.messages("JobAlreadyActive"))

		// The first ends: the schedule Forbid skipped (00:02) is still unmet, and is made now,
		// as kube's controller does without startingDeadlineSeconds.
		r.succeed(first)
		second := "tick-15778082"
		assert.Equal(t, []string{first, second}, r.jobNames())
		r.get(key, &cj)
		require.Len(t, cj.Status.Active, 1)
		assert.Equal(t, second, cj.Status.Active[0].Name)
		require.NotNil(t, cj.Status.LastSuccessfulTime)
		assert.Contains(t, r.events.messages("SawCompletedJob"), "Saw completed job: "+first+", condition: Complete")

		r.succeed(second)
		assert.Equal(t, []string{second}, r.jobNames(), "one successful Job kept, the oldest deleted")
		assert.Contains(t, r.events.messages("SuccessfulDelete"), "Deleted job "+first)

		at(3)
		third := "tick-15778083"
		assert.Equal(t, []string{second, third}, r.jobNames())
		r.succeed(third)

		var c batchv1.CronJob
		r.update(key, &c, func() { c.Spec.Suspend = ptr.To(true) })
		at(5)
		assert.Equal(t, []string{third}, r.jobNames(), "suspended")

		r.update(key, &c, func() { c.Spec.Suspend = ptr.To(false) })
		synctest.Wait()
		assert.Equal(t, []string{third, "tick-15778085"}, r.jobNames(), "the most recent unmet schedule, 00:05")
	})
}

// TestCronJobReplace: under Replace, the Job still running at the next schedule is deleted
// and a new one made.
func TestCronJobReplace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newCluster(t)
		defer r.stop()
		r.create(cronJobKey("swap"), &batchv1.CronJob{
			TypeMeta:   metav1.TypeMeta{APIVersion: "batch/v1", Kind: "CronJob"},
			ObjectMeta: metav1.ObjectMeta{Name: "swap"},
			Spec: batchv1.CronJobSpec{Schedule: "*/2 * * * *", ConcurrencyPolicy: batchv1.ReplaceConcurrent,
				JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
					RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}}}},
		})
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		assert.Equal(t, []string{"swap-15778082"}, r.jobNames())
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		assert.Equal(t, []string{"swap-15778084"}, r.jobNames(), "the running Job replaced")
		var cj batchv1.CronJob
		r.get(cronJobKey("swap"), &cj)
		require.Len(t, cj.Status.Active, 1)
		assert.Equal(t, "swap-15778084", cj.Status.Active[0].Name)
	})
}
