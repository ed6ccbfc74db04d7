package workloads

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const jobSource = "job-controller"

// Jobs runs Jobs (status only): a Job starts at once (startTime; active and ready are its
// parallelism), and each wave of parallelism pods succeeds JobDuration after the last, until
// spec.completions have (one wave when completions is unset); then succeeded, completionTime
// and the SuccessCriteriaMet and Complete conditions (reason CompletionsReached), and an Event
// Completed, as kube's Job controller writes them. An Indexed Job lists its completedIndexes.
// A suspended Job does not start (condition Suspended), and starts afresh when resumed. Pods
// never fail here: backoffLimit and activeDeadlineSeconds never apply.
type Jobs struct {
	cfg Config
	pacer

	// mu guards started: when each running Job started, to the nanosecond (status.startTime
	// keeps seconds). After a restart or a change of leader it is read from startTime.
	mu      sync.Mutex
	started map[cache.Key]jobStart
}

// jobStart is when the Job with uid started.
type jobStart struct {
	uid string
	at  time.Time
}

var (
	_ reconciler.Reconciler = (*Jobs)(nil)
	_ reconciler.Scheduler  = (*Jobs)(nil)
)

// NewJobs returns the Job simulator.
func NewJobs(cfg Config) *Jobs {
	return &Jobs{cfg: cfg.withDefaults(), started: map[cache.Key]jobStart{}}
}

const completionsReached = "Reached expected number of succeeded pods"

// Reconcile does what is due for the Job at key.
func (r *Jobs) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	now := r.cfg.Clock.Now()
	var j batchv1.Job
	obj, ended, res, err := r.begin(ctx, r.cfg.Client, key, &j, now, func() bool { return jobFinished(j.Status) })
	if ended {
		r.forget(key)
	}
	if obj == nil {
		return res, err
	}
	st := *j.Status.DeepCopy()
	st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	st.Terminating = ptr.To[int32](0)
	var next time.Time
	var reason, message string // the Event to record

	suspended := j.Spec.Suspend != nil && *j.Spec.Suspend
	wasSuspended := jobCondition(st, batchv1.JobSuspended) == corev1.ConditionTrue
	switch {
	case suspended:
		r.forget(key)
		st.Active, st.Ready = 0, ptr.To[int32](0)
		if !wasSuspended {
			setJobCondition(&st, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", now)
			reason, message = "Suspended", "Job suspended"
		}
	default:
		if wasSuspended {
			setJobCondition(&st, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", now)
			st.StartTime = nil
			r.forget(key)
			reason, message = "Resumed", "Job resumed"
		}
		start := r.start(key, obj.UID(), st.StartTime, now)
		st.StartTime = ptr.To(metav1.NewTime(start))
		next = r.progress(&j, &st, start, now)
		if jobFinished(st) {
			r.forget(key)
			reason, message = "Completed", "Job completed"
		}
	}
	res = r.schedule(key, next, now)
	if equalJSON(st, j.Status) {
		return res, nil
	}
	if err := writeStatus(ctx, r.cfg.Client, obj, st); err != nil {
		return reconciler.Result{}, err
	}
	if reason != "" {
		record(ctx, r.cfg, obj, "batch/v1", "Job", jobSource, reason, message)
	}
	return res, nil
}

// progress sets the counts of a running Job from how long it has run, and returns when the
// next wave ends (zero when it is complete, or runs no pod).
func (r *Jobs) progress(j *batchv1.Job, st *batchv1.JobStatus, start, now time.Time) time.Time {
	parallelism := int32(1)
	if j.Spec.Parallelism != nil {
		parallelism = *j.Spec.Parallelism
	}
	target := parallelism // without completions, one wave: every pod succeeds once
	if j.Spec.Completions != nil {
		target = *j.Spec.Completions
	}
	if parallelism <= 0 && target > 0 {
		st.Active, st.Ready = 0, ptr.To[int32](0)
		return time.Time{}
	}
	waves := int32(1 << 30)
	if d := r.cfg.JobDuration; d > 0 {
		waves = int32(min(now.Sub(start)/d, 1<<30))
	}
	need := int32(0) // waves to reach target
	if parallelism > 0 {
		need = (target + parallelism - 1) / parallelism
	}
	succeeded := min(int64(waves)*int64(parallelism), int64(target))
	st.Succeeded = int32(succeeded)
	if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion && st.Succeeded > 0 {
		st.CompletedIndexes = indexRange(st.Succeeded)
	}
	if st.Succeeded >= target {
		st.Active, st.Ready = 0, ptr.To[int32](0)
		end := now
		if r.cfg.JobDuration > 0 {
			end = start.Add(time.Duration(need) * r.cfg.JobDuration)
		}
		st.CompletionTime = ptr.To(metav1.NewTime(end))
		setJobCondition(st, batchv1.JobSuccessCriteriaMet, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, completionsReached, now)
		setJobCondition(st, batchv1.JobComplete, corev1.ConditionTrue, batchv1.JobReasonCompletionsReached, completionsReached, now)
		return time.Time{}
	}
	st.Active = min(parallelism, target-st.Succeeded)
	st.Ready = ptr.To(st.Active)
	return start.Add(time.Duration(waves+1) * r.cfg.JobDuration)
}

// start returns when the Job at key (with uid) started: remembered, else its startTime, else
// now.
func (r *Jobs) start(key cache.Key, uid string, stored *metav1.Time, now time.Time) time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s, ok := r.started[key]; ok && s.uid == uid {
		return s.at
	}
	t := now
	if stored != nil {
		t = stored.Time
	}
	r.started[key] = jobStart{uid, t}
	return t
}

// ForgetSchedules forgets when each Job's next wave is due and when each started, for a clock
// that was set back (a snapshot restored with its time): a running Job's start is read from
// its startTime again.
func (r *Jobs) ForgetSchedules() {
	r.pacer.ForgetSchedules()
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.started)
}

func (r *Jobs) forget(key cache.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.started, key)
}

// jobFinished says the Job has its terminal condition.
func jobFinished(st batchv1.JobStatus) bool {
	return jobCondition(st, batchv1.JobComplete) == corev1.ConditionTrue || jobCondition(st, batchv1.JobFailed) == corev1.ConditionTrue
}

func jobCondition(st batchv1.JobStatus, t batchv1.JobConditionType) corev1.ConditionStatus {
	for _, c := range st.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

// setJobCondition sets a condition as kube's Job controller does (lastProbeTime and
// lastTransitionTime both now when it changes).
func setJobCondition(st *batchv1.JobStatus, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, msg string, now time.Time) {
	ts := metav1.NewTime(now)
	for i := range st.Conditions {
		c := &st.Conditions[i]
		if c.Type != t {
			continue
		}
		if c.Status != status || c.Reason != reason || c.Message != msg {
			c.Status, c.Reason, c.Message, c.LastProbeTime, c.LastTransitionTime = status, reason, msg, ts, ts
		}
		return
	}
	st.Conditions = append(st.Conditions, batchv1.JobCondition{Type: t, Status: status, Reason: reason, Message: msg, LastProbeTime: ts, LastTransitionTime: ts})
}

// indexRange is kube's completedIndexes for indexes 0 to n-1.
func indexRange(n int32) string {
	if n == 1 {
		return "0"
	}
	return fmt.Sprintf("0-%d", n-1)
}
