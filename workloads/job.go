package workloads

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

const jobSource = "job-controller"

// JobOwner is the owner of a Job's Pods.
var JobOwner = Owner{Resource: JobResource, APIVersion: "batch/v1", Kind: "Job"}

// The Job controller's timings and bounds, kube's.
const (
	// jobBackoff is the delay before a Pod replaces a failed one, doubled per failure since the
	// last success, up to jobMaxBackoff.
	jobBackoff    = 10 * time.Second
	jobMaxBackoff = 10 * time.Minute
	// maxPodCreateDeletePerSync bounds the Pods a pass creates or deletes.
	maxPodCreateDeletePerSync = 500
)

// Jobs is kube-controller-manager's Job controller (pkg/controller/job), written again. Each
// pass lists the Pods the Job controls (its selector, a controller ownerReference to its uid)
// and:
//   - creates Pods from its template until min(parallelism, completions - succeeded) are active
//     (generateName <job>-, the batch.kubernetes.io/job-tracking finalizer; Indexed Jobs name
//     each Pod <job>-<index>- and give it the completion index as the
//     batch.kubernetes.io/job-completion-index annotation and label, and hostname <job>-<index>,
//     lowest pending index first), or deletes the surplus; a failed Pod is replaced after kube's
//     backoff (10 s, doubled per failure since the last success, at most 10 minutes, on the
//     clock);
//   - counts finished Pods as kube does, through status.uncountedTerminatedPods: a Succeeded
//     Pod, a Failed one or one deleted before it succeeded is recorded there, its finalizer
//     removed, then it is counted in succeeded or failed (Indexed Jobs count completedIndexes);
//   - finishes: more failures than backoffLimit (FailureTarget, then Failed, reason
//     BackoffLimitExceeded) or past activeDeadlineSeconds (DeadlineExceeded) deletes the active
//     Pods; enough completions (SuccessCriteriaMet, then Complete, reason CompletionsReached,
//     and completionTime) once no Pod is active; the final condition waits for every Pod to be
//     counted and none to be terminating;
//   - suspend deletes the active Pods (condition Suspended); resuming sets startTime again;
//   - finished, being deleted or gone: its Pods' finalizers are removed (kube's
//     syncOrphanPod), so that the collector can delete them.
//
// Its status: active, ready, terminating, succeeded, failed, startTime, completionTime,
// completedIndexes, uncountedTerminatedPods, conditions; with kube's SuccessfulCreate,
// SuccessfulDelete, Completed, Suspended and Resumed Events, and a Warning with the failure's
// reason. A Pod's change enqueues its Job (FollowChildren). Pod failure policies, success
// policies, backoffLimitPerIndex and restartPolicy OnFailure's restarts are not applied.
type Jobs struct {
	cfg Config

	// mu guards backoff: the failures since each Job's last success (kube keeps it in memory
	// too).
	mu      sync.Mutex
	backoff map[cache.Key]jobBackoffRecord
}

// jobBackoffRecord is how many Pods of the Job with uid failed since its last success, and
// when the last did.
type jobBackoffRecord struct {
	uid         string
	failures    int32
	lastFailure time.Time
}

var _ reconciler.Reconciler = (*Jobs)(nil)

// NewJobs returns the Job controller.
func NewJobs(cfg Config) *Jobs {
	return &Jobs{cfg: cfg.withDefaults(), backoff: map[cache.Key]jobBackoffRecord{}}
}

// ForgetSchedules forgets the Jobs' backoffs, for a clock that was set back (a snapshot
// restored with its time).
func (r *Jobs) ForgetSchedules() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.backoff)
}

// jobTrackingFinalizer holds a Job's Pod until the Job has counted it.
const jobTrackingFinalizer = batchv1.JobTrackingFinalizer

const completionsReached = "Reached expected number of succeeded pods"

// jobPass is one pass over a Job.
type jobPass struct {
	r         *Jobs
	key       cache.Key
	obj       *cache.Object
	job       *batchv1.Job
	now       time.Time
	pods      []*corev1.Pod
	active    []*corev1.Pod
	indexed   bool
	succeeded sets.Set[int] // Indexed: the succeeded indexes
	finished  *batchv1.JobCondition
	backoff   jobBackoffRecord
	requeue   time.Duration
}

// Reconcile does what kube's syncJob does for the Job at key.
func (r *Jobs) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	var job batchv1.Job
	obj, gone, err := read(ctx, r.cfg.Client, key, &job)
	if gone {
		r.forget(key)
		r.cfg.claims.forget(key)
		return reconciler.Result{}, r.releaseOrphans(ctx, key)
	}
	if err != nil {
		return reconciler.Result{}, err
	}
	sel, err := metav1.LabelSelectorAsSelector(job.Spec.Selector)
	if err != nil || sel.Empty() {
		return reconciler.Result{}, nil
	}
	pods, err := claimOwned(ctx, r.cfg.Client, r.cfg.claims, claim{Children: PodResource, Owner: JobOwner, Obj: obj, Selector: sel, Finalizer: batchv1.JobTrackingFinalizer}, decodePod)
	if err != nil {
		return reconciler.Result{}, err
	}
	p := &jobPass{r: r, key: key, obj: obj, job: &job, now: r.cfg.Clock.Now(), pods: pods,
		indexed: job.Spec.CompletionMode != nil && *job.Spec.CompletionMode == batchv1.IndexedCompletion}
	if jobFinished(job.Status) || obj.Deleting() {
		// Finished or going: its Pods are let go (the collector takes them with the Job).
		r.forget(key)
		return reconciler.Result{}, p.removeFinalizers(ctx, slices.DeleteFunc(slices.Clone(pods), func(pod *corev1.Pod) bool { return !hasTrackingFinalizer(pod) }))
	}
	err = p.sync(ctx)
	return reconciler.Result{RequeueAfter: p.requeue}, err
}

// releaseOrphans takes the tracking finalizer off the Pods whose Job (key) is gone, so that
// their deletion (the collector's, with the Job) completes, as kube's syncOrphanPod does.
func (r *Jobs) releaseOrphans(ctx context.Context, key cache.Key) error {
	l, err := r.cfg.Client.List(ctx, PodResource, cache.InNamespace(key.Namespace))
	if err != nil {
		return err
	}
	var orphans []*corev1.Pod
	for _, o := range l.Items {
		if !bytes.Contains(o.Raw(), []byte(jobTrackingFinalizer)) {
			continue
		}
		if ref := controllerOf(o); ref == nil || ref.Kind != JobOwner.Kind || ref.APIVersion != JobOwner.APIVersion || ref.Name != key.Name {
			continue
		}
		if pod, err := decodePod(o); err == nil && hasTrackingFinalizer(pod) {
			orphans = append(orphans, pod)
		}
	}
	p := &jobPass{r: r, key: key}
	return p.removeFinalizers(ctx, orphans)
}

// sync is syncJob past its listing.
func (p *jobPass) sync(ctx context.Context) error {
	job, st := p.job, &p.job.Status
	if st.UncountedTerminatedPods == nil {
		st.UncountedTerminatedPods = &batchv1.UncountedTerminatedPods{}
	}
	old := *st.DeepCopy()
	uncountedSucceeded := sets.New(st.UncountedTerminatedPods.Succeeded...)
	uncountedFailed := sets.New(st.UncountedTerminatedPods.Failed...)
	terminating := int32(0)
	for _, pod := range p.pods {
		switch {
		case podActive(pod):
			p.active = append(p.active, pod)
		case pod.DeletionTimestamp != nil && !podFinished(pod):
			terminating++
		}
	}
	ready := int32(0)
	for _, pod := range p.active {
		if c := podReadyCondition(pod); c != nil && c.Status == corev1.ConditionTrue {
			ready++
		}
	}
	var newSucceeded, newFailed []*corev1.Pod
	for _, pod := range p.pods {
		if !hasTrackingFinalizer(pod) || uncountedSucceeded.Has(pod.UID) || uncountedFailed.Has(pod.UID) || !p.validIndex(pod) {
			continue
		}
		if pod.Status.Phase == corev1.PodSucceeded {
			newSucceeded = append(newSucceeded, pod)
		} else if podFailedForJob(pod) {
			newFailed = append(newFailed, pod)
		}
	}
	succeeded := st.Succeeded + int32(len(newSucceeded)+uncountedSucceeded.Len())
	failed := st.Failed + int32(len(newFailed)+uncountedFailed.Len())
	suspended := ptrOr(job.Spec.Suspend, false)
	if st.StartTime == nil && !suspended {
		st.StartTime = ptr.To(metav1.NewTime(p.now))
	}
	p.backoff = p.r.nextBackoff(p.key, p.obj.UID(), newSucceeded, newFailed, p.now)

	if c := jobConditionOf(*st, batchv1.JobSuccessCriteriaMet); c != nil && c.Status == corev1.ConditionTrue {
		p.finished = c
	} else if c := jobConditionOf(*st, batchv1.JobFailureTarget); c != nil && c.Status == corev1.ConditionTrue {
		p.finished = c
	} else if failed > ptrOr(job.Spec.BackoffLimit, 6) {
		p.finished = p.condition(batchv1.JobFailureTarget, batchv1.JobReasonBackoffLimitExceeded, "Job has reached the specified backoff limit")
	} else if d := job.Spec.ActiveDeadlineSeconds; d != nil && !suspended && st.StartTime != nil {
		if left := st.StartTime.Add(time.Duration(*d) * time.Second).Sub(p.now); left <= 0 {
			p.finished = p.condition(batchv1.JobFailureTarget, batchv1.JobReasonDeadlineExceeded, "Job was active longer than specified deadline")
		} else {
			p.requeue = sooner(p.requeue, left)
		}
	}
	if p.indexed {
		p.succeeded = parseIndexes(st.CompletedIndexes, int(*job.Spec.Completions))
		for _, pod := range p.pods {
			if pod.Status.Phase == corev1.PodSucceeded && p.validIndex(pod) {
				p.succeeded.Insert(completionIndex(pod))
			}
		}
		succeeded = int32(p.succeeded.Len())
	}

	active := int32(len(p.active))
	suspendChanged := false
	var manageErr error
	if p.finished != nil {
		deleted, deletedReady, err := p.deletePods(ctx, p.active)
		if deleted != active {
			p.finished = nil // not every Pod could be deleted: not finished yet
		}
		active, terminating, ready, manageErr = active-deleted, terminating+deleted, ready-deletedReady, err
	} else {
		var removed, removedReady int32
		removed, removedReady, manageErr = p.manage(ctx, succeeded, &active)
		terminating, ready = terminating+removed, ready-removedReady
		complete := succeeded > 0 && active == 0
		if job.Spec.Completions != nil {
			complete = succeeded >= *job.Spec.Completions && active == 0
		}
		switch {
		case complete:
			p.finished = p.condition(batchv1.JobSuccessCriteriaMet, batchv1.JobReasonCompletionsReached, completionsReached)
		case suspended:
			if setJobCondition(st, batchv1.JobSuspended, corev1.ConditionTrue, "JobSuspended", "Job suspended", p.now) {
				suspendChanged = true
				p.event(events.TypeNormal, "Suspended", "Job suspended")
			}
		default:
			if c := jobConditionOf(*st, batchv1.JobSuspended); c != nil && setJobCondition(st, batchv1.JobSuspended, corev1.ConditionFalse, "JobResumed", "Job resumed", p.now) {
				suspendChanged = true
				p.event(events.TypeNormal, "Resumed", "Job resumed")
				st.StartTime = ptr.To(metav1.NewTime(p.now))
			}
		}
	}
	st.Active, st.Ready, st.Terminating = active, ptr.To(ready), ptr.To(terminating)
	flush := suspendChanged || !equalJSON(old, *st)
	if err := p.track(ctx, flush); err != nil {
		return err
	}
	return manageErr
}

// manage creates or deletes Pods toward the active count the Job wants (kube's manageJob) and
// returns how many it deleted and how many of those were ready; *active is updated.
func (p *jobPass) manage(ctx context.Context, succeeded int32, active *int32) (removed, removedReady int32, err error) {
	job := p.job
	if ptrOr(job.Spec.Suspend, false) {
		removed, removedReady, err = p.deletePods(ctx, p.active)
		*active -= removed
		return removed, removedReady, err
	}
	parallelism := ptrOr(job.Spec.Parallelism, 1)
	want := parallelism
	switch {
	case job.Spec.Completions == nil && succeeded > 0:
		want = *active
	case job.Spec.Completions != nil:
		want = max(min(*job.Spec.Completions-succeeded, parallelism), 0)
	}
	if surplus := *active - want; surplus > 0 {
		rm := p.forRemoval(int(surplus))
		removed, removedReady, err = p.deletePods(ctx, rm[:min(len(rm), maxPodCreateDeletePerSync)])
		*active -= removed
		return removed, removedReady, err
	}
	diff := min(want-*active, maxPodCreateDeletePerSync)
	if diff <= 0 {
		return 0, 0, nil
	}
	if wait := p.backoff.remaining(p.now); wait > 0 {
		p.requeue = sooner(p.requeue, wait)
		return 0, 0, nil
	}
	var indexes []int
	if p.indexed {
		indexes = p.pendingIndexes(int(diff))
		diff = int32(len(indexes))
	}
	for i := range int(diff) {
		index := -1
		if p.indexed {
			index = indexes[i]
		}
		if err := p.createPod(ctx, index); err != nil {
			return 0, 0, err
		}
		*active++
	}
	return 0, 0, nil
}

// createPod creates a Pod from the Job's template (index ≥ 0: of that completion index).
func (p *jobPass) createPod(ctx context.Context, index int) error {
	job := p.job
	t := job.Spec.Template.DeepCopy()
	if !slices.Contains(t.Finalizers, jobTrackingFinalizer) {
		t.Finalizers = append(t.Finalizers, jobTrackingFinalizer)
	}
	name := job.Name + "-"
	if index >= 0 {
		ix := strconv.Itoa(index)
		if t.Annotations == nil {
			t.Annotations = map[string]string{}
		}
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Annotations[batchv1.JobCompletionIndexAnnotation] = ix
		t.Labels[batchv1.JobCompletionIndexAnnotation] = ix
		t.Spec.Hostname = job.Name + "-" + ix
		name = indexedGenerateName(job.Name, index)
	}
	pod, err := createPod(ctx, p.r.cfg.Client, podFromTemplate(t, job.Namespace, name, controllerRef(JobOwner, job.Name, p.obj.UID())))
	if err != nil {
		return err
	}
	p.event(events.TypeNormal, "SuccessfulCreate", "Created pod: "+pod.Name)
	return nil
}

// indexedGenerateName is kube's podGenerateNameWithIndex: <job>-<index>-, the job's name cut
// so that a generated name fits 63 characters.
func indexedGenerateName(job string, index int) string {
	suffix := "-" + strconv.Itoa(index) + "-"
	const maxGenerated = 63 - 5 // names.MaxGeneratedNameLength
	if len(job)+len(suffix) > maxGenerated {
		job = job[:maxGenerated-len(suffix)]
	}
	return job + suffix
}

// deletePods deletes pods and returns how many went and how many of those were ready.
func (p *jobPass) deletePods(ctx context.Context, pods []*corev1.Pod) (deleted, deletedReady int32, err error) {
	for _, pod := range pods {
		if err := deletePod(ctx, p.r.cfg.Client, pod); err != nil {
			return deleted, deletedReady, err
		}
		deleted++
		if c := podReadyCondition(pod); c != nil && c.Status == corev1.ConditionTrue {
			deletedReady++
		}
		p.event(events.TypeNormal, "SuccessfulDelete", "Deleted pod: "+pod.Name)
	}
	return deleted, deletedReady, nil
}

// forRemoval picks n active Pods to delete (kube's activePodsForRemoval): of an Indexed Job
// first those of an index out of range or repeated, then as the ReplicaSet controller picks.
func (p *jobPass) forRemoval(n int) []*corev1.Pod {
	var rm, left []*corev1.Pod
	if p.indexed {
		seen := map[int]bool{}
		for _, pod := range sortedByIndex(p.active) {
			ix := completionIndex(pod)
			if !p.validIndex(pod) || seen[ix] {
				rm = append(rm, pod)
				continue
			}
			seen[ix] = true
			left = append(left, pod)
		}
	} else {
		left = slices.Clone(p.active)
	}
	if len(rm) < n {
		slices.SortStableFunc(left, deletionOrder)
		rm = append(rm, left[:n-len(rm)]...)
	}
	return rm
}

// pendingIndexes are the n lowest indexes neither succeeded nor active.
func (p *jobPass) pendingIndexes(n int) []int {
	taken := p.succeeded.Clone()
	for _, pod := range p.active {
		taken.Insert(completionIndex(pod))
	}
	var out []int
	for ix := 0; ix < int(*p.job.Spec.Completions) && len(out) < n; ix++ {
		if !taken.Has(ix) {
			out = append(out, ix)
		}
	}
	return out
}

// track records the finished Pods in uncountedTerminatedPods, removes their finalizers, counts
// them, and finishes the Job when it may (kube's trackJobStatusAndRemoveFinalizers).
func (p *jobPass) track(ctx context.Context, flush bool) error {
	st := &p.job.Status
	withFinalizer := sets.New[types.UID]()
	for _, pod := range p.pods {
		if hasTrackingFinalizer(pod) {
			withFinalizer.Insert(pod.UID)
		}
	}
	flush = countUncounted(st, withFinalizer) || flush
	uncounted := st.UncountedTerminatedPods
	uncountedSucceeded, uncountedFailed := sets.New(uncounted.Succeeded...), sets.New(uncounted.Failed...)
	var release []*corev1.Pod
	var newIndexes []int
	for _, pod := range p.pods {
		if !hasTrackingFinalizer(pod) {
			continue
		}
		failed := podFailedForJob(pod)
		if !(p.finished != nil || pod.Status.Phase == corev1.PodSucceeded || failed) {
			continue
		}
		release = append(release, pod)
		switch {
		case pod.Status.Phase == corev1.PodSucceeded && !uncountedFailed.Has(pod.UID):
			if p.indexed {
				if ix := completionIndex(pod); p.validIndex(pod) && !parseIndexes(st.CompletedIndexes, int(*p.job.Spec.Completions)).Has(ix) {
					newIndexes = append(newIndexes, ix)
					flush = true
				}
			} else if !uncountedSucceeded.Has(pod.UID) {
				uncounted.Succeeded = append(uncounted.Succeeded, pod.UID)
				flush = true
			}
		case failed || (p.finished != nil && p.finished.Type != batchv1.JobSuccessCriteriaMet):
			if !uncountedFailed.Has(pod.UID) && p.validIndex(pod) {
				uncounted.Failed = append(uncounted.Failed, pod.UID)
				flush = true
			}
		}
	}
	if p.indexed {
		done := parseIndexes(st.CompletedIndexes, int(*p.job.Spec.Completions)).Insert(newIndexes...)
		st.Succeeded, st.CompletedIndexes = int32(done.Len()), formatIndexes(done)
	}
	var final *batchv1.JobCondition
	if p.finished != nil {
		final = p.finished
		switch p.finished.Type {
		case batchv1.JobFailureTarget:
			if jobConditionOf(*st, batchv1.JobFailureTarget) == nil {
				st.Conditions = append(st.Conditions, *p.finished)
				flush = true
			}
			final = p.condition(batchv1.JobFailed, p.finished.Reason, p.finished.Message)
		case batchv1.JobSuccessCriteriaMet:
			if jobConditionOf(*st, batchv1.JobSuccessCriteriaMet) == nil {
				st.Conditions = append(st.Conditions, *p.finished)
				flush = true
			}
			final = p.condition(batchv1.JobComplete, p.finished.Reason, p.finished.Message)
		}
	}
	if flush {
		if err := p.writeStatus(ctx); err != nil {
			return err
		}
		p.r.setBackoff(p.key, p.backoff)
		flush = false
	}
	rmErr := p.removeFinalizers(ctx, release)
	for _, pod := range release {
		if pod.Finalizers == nil || !hasTrackingFinalizer(pod) {
			withFinalizer.Delete(pod.UID)
		}
	}
	flush = countUncounted(st, withFinalizer) || flush
	if rmErr != nil {
		if flush {
			if err := p.writeStatus(ctx); err != nil {
				return err
			}
		}
		return rmErr
	}
	finished := false
	if final != nil && len(st.UncountedTerminatedPods.Succeeded)+len(st.UncountedTerminatedPods.Failed) == 0 && ptrOr(st.Terminating, 0) == 0 {
		setJobCondition(st, final.Type, corev1.ConditionTrue, final.Reason, final.Message, p.now)
		if final.Type == batchv1.JobComplete {
			st.CompletionTime = ptr.To(metav1.NewTime(p.now))
		}
		finished, flush = true, true
	}
	if !flush {
		return nil
	}
	if err := p.writeStatus(ctx); err != nil {
		return err
	}
	if finished {
		p.r.forget(p.key)
		if final.Type == batchv1.JobComplete {
			p.event(events.TypeNormal, "Completed", "Job completed")
		} else {
			p.event(events.TypeWarning, final.Reason, final.Message)
		}
	}
	return nil
}

// writeStatus writes the Job's status and keeps the stored object for the next write.
func (p *jobPass) writeStatus(ctx context.Context) error {
	m, err := p.obj.Decode()
	if err != nil {
		return reconciler.TerminalError(err)
	}
	st, err := toMap(p.job.Status)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	m["status"] = st
	m["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatUint(p.obj.ResourceVersion(), 10)
	o, err := p.r.cfg.Client.UpdateStatus(ctx, p.obj.Key(), m)
	if err != nil {
		return err
	}
	p.obj = o
	return nil
}

// removeFinalizers takes the job-tracking finalizer off pods; a Pod's Finalizers are nil
// once it is off.
func (p *jobPass) removeFinalizers(ctx context.Context, pods []*corev1.Pod) error {
	var errs []error
	for _, pod := range pods {
		key := cache.Key{Resource: PodResource.Resource, Namespace: pod.Namespace, Name: pod.Name}
		o, err := p.r.cfg.Client.Get(ctx, key)
		if errors.Is(err, cache.ErrNotFound) {
			pod.Finalizers = nil
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if o.UID() != string(pod.UID) {
			pod.Finalizers = nil
			continue
		}
		m, err := o.Decode()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		meta := m["metadata"].(map[string]any)
		fs, _ := meta["finalizers"].([]any)
		meta["finalizers"] = slices.DeleteFunc(slices.Clone(fs), func(f any) bool { return f == jobTrackingFinalizer })
		meta["resourceVersion"] = strconv.FormatUint(o.ResourceVersion(), 10)
		if _, err := p.r.cfg.Client.Update(ctx, key, m); err != nil && !errors.Is(err, cache.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		pod.Finalizers = nil
	}
	return errors.Join(errs...)
}

// condition is a new Job condition of typ at now.
func (p *jobPass) condition(typ batchv1.JobConditionType, reason, msg string) *batchv1.JobCondition {
	t := metav1.NewTime(p.now)
	return &batchv1.JobCondition{Type: typ, Status: corev1.ConditionTrue, Reason: reason, Message: msg, LastProbeTime: t, LastTransitionTime: t}
}

func (p *jobPass) event(typ, reason, msg string) {
	recordEvent(context.Background(), p.r.cfg, p.obj, "batch/v1", "Job", jobSource, typ, reason, msg)
}

// validIndex: not Indexed, or the Pod's completion index is within completions.
func (p *jobPass) validIndex(pod *corev1.Pod) bool {
	if !p.indexed {
		return true
	}
	ix := completionIndex(pod)
	return ix >= 0 && ix < int(ptrOr(p.job.Spec.Completions, 0))
}

// countUncounted moves the uncounted Pods whose finalizer is gone into succeeded and failed
// (kube's cleanUncountedPodsWithoutFinalizers) and reports whether it moved any.
func countUncounted(st *batchv1.JobStatus, withFinalizer sets.Set[types.UID]) bool {
	u := st.UncountedTerminatedPods
	keep := func(uids []types.UID) []types.UID {
		return slices.DeleteFunc(slices.Clone(uids), func(uid types.UID) bool { return !withFinalizer.Has(uid) })
	}
	succeeded, failed := keep(u.Succeeded), keep(u.Failed)
	moved := len(u.Succeeded) - len(succeeded) + len(u.Failed) - len(failed)
	st.Succeeded += int32(len(u.Succeeded) - len(succeeded))
	st.Failed += int32(len(u.Failed) - len(failed))
	u.Succeeded, u.Failed = succeeded, failed
	if len(u.Succeeded) == 0 {
		u.Succeeded = nil
	}
	if len(u.Failed) == 0 {
		u.Failed = nil
	}
	return moved > 0
}

// nextBackoff is the Job's backoff record with the newly finished Pods (kube's
// newBackoffRecord).
func (r *Jobs) nextBackoff(key cache.Key, uid string, succeeded, failed []*corev1.Pod, now time.Time) jobBackoffRecord {
	r.mu.Lock()
	b := r.backoff[key]
	r.mu.Unlock()
	if b.uid != uid {
		b = jobBackoffRecord{uid: uid}
	}
	byFinish := func(a, b *corev1.Pod) int { return finishedAt(a).Compare(finishedAt(b)) }
	slices.SortStableFunc(succeeded, byFinish)
	slices.SortStableFunc(failed, byFinish)
	switch {
	case len(failed) == 0 && len(succeeded) == 0:
	case len(succeeded) == 0:
		b.failures += int32(len(failed))
		b.lastFailure = finishedAt(failed[len(failed)-1])
	default:
		b.failures, b.lastFailure = 0, time.Time{}
		last := finishedAt(succeeded[len(succeeded)-1])
		for i := len(failed) - 1; i >= 0 && finishedAt(failed[i]).After(last); i-- {
			if b.lastFailure.IsZero() {
				b.lastFailure = finishedAt(failed[i])
			}
			b.failures++
		}
	}
	return b
}

func (r *Jobs) setBackoff(key cache.Key, b jobBackoffRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backoff[key] = b
}

func (r *Jobs) forget(key cache.Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.backoff, key)
}

// remaining is how long until a Pod may replace the failed ones at now.
func (b jobBackoffRecord) remaining(now time.Time) time.Duration {
	if b.failures == 0 {
		return 0
	}
	d := jobBackoff
	for i := 1; i < int(b.failures) && d < jobMaxBackoff; i++ {
		d *= 2
	}
	d = min(d, jobMaxBackoff)
	if elapsed := now.Sub(b.lastFailure); elapsed < d {
		return d - elapsed
	}
	return 0
}

// finishedAt is when a Pod finished (kube's getFinishedTime): its containers' last
// termination, else its Ready=False transition, else its deletion, else its creation.
func finishedAt(p *corev1.Pod) time.Time {
	var last time.Time
	for _, cs := range slices.Concat(p.Status.ContainerStatuses, p.Status.InitContainerStatuses) {
		if t := cs.State.Terminated; t != nil && t.FinishedAt.After(last) {
			last = t.FinishedAt.Time
		}
	}
	if !last.IsZero() {
		return last
	}
	if c := podReadyCondition(p); c != nil && c.Status == corev1.ConditionFalse {
		return c.LastTransitionTime.Time
	}
	if p.DeletionTimestamp != nil {
		return p.DeletionTimestamp.Time
	}
	return p.CreationTimestamp.Time
}

// podFailedForJob: Failed, or deleted before it succeeded (the Job's default
// podReplacementPolicy, TerminatingOrFailed).
func podFailedForJob(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || (p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded)
}

func hasTrackingFinalizer(p *corev1.Pod) bool {
	return slices.Contains(p.Finalizers, jobTrackingFinalizer)
}

// completionIndex is an Indexed Job Pod's index from its annotation, -1 without one.
func completionIndex(p *corev1.Pod) int {
	ix, err := strconv.Atoi(p.Annotations[batchv1.JobCompletionIndexAnnotation])
	if err != nil || ix < 0 {
		return -1
	}
	return ix
}

func sortedByIndex(pods []*corev1.Pod) []*corev1.Pod {
	out := slices.Clone(pods)
	slices.SortStableFunc(out, func(a, b *corev1.Pod) int { return completionIndex(a) - completionIndex(b) })
	return out
}

// jobFinished says the Job has its terminal condition.
func jobFinished(st batchv1.JobStatus) bool {
	for _, t := range []batchv1.JobConditionType{batchv1.JobComplete, batchv1.JobFailed} {
		if c := jobConditionOf(st, t); c != nil && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func jobConditionOf(st batchv1.JobStatus, t batchv1.JobConditionType) *batchv1.JobCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setJobCondition sets a condition as kube's ensureJobConditionStatus does (lastProbeTime and
// lastTransitionTime both now when it changes; a False condition is not added) and reports
// whether it changed.
func setJobCondition(st *batchv1.JobStatus, t batchv1.JobConditionType, status corev1.ConditionStatus, reason, msg string, now time.Time) bool {
	ts := metav1.NewTime(now)
	if c := jobConditionOf(*st, t); c != nil {
		if c.Status == status && c.Reason == reason && c.Message == msg {
			return false
		}
		c.Status, c.Reason, c.Message, c.LastProbeTime, c.LastTransitionTime = status, reason, msg, ts, ts
		return true
	}
	if status != corev1.ConditionTrue {
		return false
	}
	st.Conditions = append(st.Conditions, batchv1.JobCondition{Type: t, Status: status, Reason: reason, Message: msg, LastProbeTime: ts, LastTransitionTime: ts})
	return true
}
