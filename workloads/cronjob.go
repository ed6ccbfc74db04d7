package workloads

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	"github.com/robfig/cron/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// cronJobSource is the component of the CronJob controller's Events, as kube names it.
const cronJobSource = "cronjob-controller"

// CronJobResource is the resource the CronJob controller reconciles.
var CronJobResource = cache.GroupResource{Group: "batch", Resource: "cronjobs"}

// CronJobOwner is the owner of the Jobs a CronJob makes.
var CronJobOwner = Owner{Resource: CronJobResource, APIVersion: "batch/v1", Kind: "CronJob"}

// nextScheduleDelta is the padding kube adds to a CronJob's requeue for the next schedule.
const nextScheduleDelta = 100 * time.Millisecond

// CronJobs is kube-controller-manager's CronJob controller (cronjob_controllerv2.go's
// syncCronJob and cleanupFinishedJobs), written again: at each schedule the CronJob's clock
// reaches (robfig/cron's standard parser, as kube's; in UTC, as kube-controller-manager runs,
// or the CronJob's timeZone) it creates the Job <cronjob>-<scheduled minutes since the epoch>
// from its jobTemplate, honouring suspend, startingDeadlineSeconds and concurrencyPolicy
// (Allow, Forbid, Replace); keeps status.active and lastScheduleTime, lastSuccessfulTime; and
// deletes the finished Jobs beyond its history limits, oldest first. It requeues itself for
// the next schedule on the clock, so a manual clock steps it.
type CronJobs struct{ cfg Config }

var _ reconciler.Reconciler = (*CronJobs)(nil)

// NewCronJobs returns the CronJob controller of cfg.
func NewCronJobs(cfg Config) *CronJobs { return &CronJobs{cfg: cfg.withDefaults()} }

// cronJobPass is one pass over a CronJob.
type cronJobPass struct {
	r      *CronJobs
	obj    *cache.Object
	cj     *batchv1.CronJob
	now    time.Time
	status bool // the status changed
}

// Reconcile does what kube's sync does for the CronJob at key.
func (r *CronJobs) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	var cj batchv1.CronJob
	obj, gone, err := read(ctx, r.cfg.Client, key, &cj)
	if gone || err != nil {
		return reconciler.Result{}, err
	}
	jobs, err := listOwned(ctx, r.cfg.Client, JobResource, key.Namespace, labels.Everything(), obj.UID(), decodeJob)
	if err != nil {
		return reconciler.Result{}, err
	}
	before := cj.Status.DeepCopy()
	p := &cronJobPass{r: r, obj: obj, cj: &cj, now: r.cfg.Clock.Now()}
	requeue, err := p.sync(ctx, jobs)
	if err == nil && !obj.Deleting() {
		p.cleanup(ctx, jobs)
	}
	if !equalJSON(before, &cj.Status) {
		if werr := writeStatus(ctx, r.cfg.Client, obj, &cj.Status); werr != nil {
			return reconciler.Result{}, werr
		}
	}
	return reconciler.Result{RequeueAfter: requeue}, err
}

func decodeJob(o *cache.Object) (*batchv1.Job, error) {
	var j batchv1.Job
	return &j, decodeInto(o, &j)
}

// sync is kube's syncCronJob: the active list brought up to date from the Jobs, then the Job
// of the most recent unmet schedule made. It returns when the next schedule is due (0: never
// on its own: suspended, or a schedule that does not parse).
func (p *cronJobPass) sync(ctx context.Context, jobs []*batchv1.Job) (time.Duration, error) {
	cj := p.cj
	children := map[types.UID]bool{}
	for _, j := range jobs {
		children[j.UID] = true
		active := inActiveList(cj, j.UID)
		finished, condition := jobFinishedCondition(j)
		switch {
		case !active && !finished:
			p.event(events.TypeWarning, "UnexpectedJob", "Saw a job that the controller did not create or forgot: "+j.Name)
		case active && finished:
			removeFromActiveList(cj, j.UID)
			p.event(events.TypeNormal, "SawCompletedJob", fmt.Sprintf("Saw completed job: %s, condition: %v", j.Name, condition))
		}
		if finished && condition == batchv1.JobComplete && j.Status.CompletionTime != nil {
			if cj.Status.LastSuccessfulTime == nil || j.Status.CompletionTime.After(cj.Status.LastSuccessfulTime.Time) {
				cj.Status.LastSuccessfulTime = j.Status.CompletionTime
			}
		}
	}
	for _, ref := range slices.Clone(cj.Status.Active) {
		if children[ref.UID] {
			continue
		}
		_, err := p.r.cfg.Client.Get(ctx, cache.Key{Group: JobResource.Group, Resource: JobResource.Resource, Namespace: ref.Namespace, Name: ref.Name})
		switch {
		case errors.Is(err, cache.ErrNotFound):
			p.event(events.TypeNormal, "MissingJob", "Active job went missing: "+ref.Name)
			removeFromActiveList(cj, ref.UID)
		case err != nil:
			return 0, err
		}
	}
	if p.obj.Deleting() {
		return 0, nil
	}
	if cj.Spec.TimeZone != nil {
		if _, err := time.LoadLocation(*cj.Spec.TimeZone); err != nil {
			p.event(events.TypeWarning, "UnknownTimeZone", fmt.Sprintf("invalid timeZone: %q: %s", *cj.Spec.TimeZone, err))
			return 0, nil
		}
	}
	if cj.Spec.Suspend != nil && *cj.Spec.Suspend {
		return 0, nil
	}
	sched, err := cron.ParseStandard(p.formatSchedule())
	if err != nil {
		p.event(events.TypeWarning, "UnparseableSchedule", fmt.Sprintf("unparseable schedule: %q : %s", cj.Spec.Schedule, err))
		return 0, nil
	}
	scheduled, err := p.nextScheduleTime(sched)
	if err != nil {
		p.event(events.TypeWarning, "InvalidSchedule", fmt.Sprintf("invalid schedule: %s : %s", cj.Spec.Schedule, err))
		return 0, nil
	}
	next := p.nextScheduleIn(sched)
	if scheduled == nil {
		return next, nil
	}
	if d := cj.Spec.StartingDeadlineSeconds; d != nil && scheduled.Add(time.Duration(*d)*time.Second).Before(p.now) {
		p.event(events.TypeWarning, "MissSchedule", "Missed scheduled time to start a job: "+scheduled.UTC().Format(time.RFC1123Z))
		return next, nil
	}
	name := cronJobJobName(cj.Name, *scheduled)
	if slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.Name == name }) ||
		(cj.Status.LastScheduleTime != nil && cj.Status.LastScheduleTime.Time.Equal(*scheduled)) {
		return next, nil // processed already
	}
	switch cj.Spec.ConcurrencyPolicy {
	case batchv1.ForbidConcurrent:
		if len(cj.Status.Active) > 0 {
			p.event(events.TypeNormal, "JobAlreadyActive", "Not starting job because prior execution is running and concurrency policy is Forbid")
			return next, nil
		}
	case batchv1.ReplaceConcurrent:
		for _, ref := range slices.Clone(cj.Status.Active) {
			var j batchv1.Job
			_, gone, err := read(ctx, p.r.cfg.Client, cache.Key{Group: JobResource.Group, Resource: JobResource.Resource, Namespace: ref.Namespace, Name: ref.Name}, &j)
			if err != nil || gone {
				p.event(events.TypeWarning, "FailedGet", fmt.Sprintf("Get job: %v", errOr(err, "not found")))
				return 0, errOr(err, "job "+ref.Name+" not found")
			}
			if err := p.deleteJob(ctx, &j); err != nil {
				return 0, fmt.Errorf("could not replace job %s/%s: %w", j.Namespace, j.Name, err)
			}
		}
	}
	job, err := p.jobFor(*scheduled)
	if err != nil {
		return 0, reconciler.TerminalError(err)
	}
	created, err := p.createJob(ctx, job)
	if err != nil || created == nil {
		return next, err
	}
	cj.Status.Active = append(cj.Status.Active, corev1.ObjectReference{APIVersion: "batch/v1", Kind: "Job", Namespace: created.Key().Namespace,
		Name: created.Key().Name, UID: types.UID(created.UID()), ResourceVersion: fmt.Sprint(created.ResourceVersion())})
	cj.Status.LastScheduleTime = &metav1.Time{Time: *scheduled}
	return next, nil
}

// createJob creates job; an existing Job of that name that this CronJob controls and that is
// not in its active list is taken as the one created (a status write lost). It returns nil
// when nothing is to be added to the active list.
func (p *cronJobPass) createJob(ctx context.Context, job *batchv1.Job) (*cache.Object, error) {
	body, err := toMap(job)
	if err != nil {
		return nil, reconciler.TerminalError(err)
	}
	key := cache.Key{Group: JobResource.Group, Resource: JobResource.Resource, Namespace: p.obj.Key().Namespace, Name: job.Name}
	created, err := p.r.cfg.Client.Create(ctx, key, body)
	switch {
	case errors.Is(err, cache.ErrAlreadyExists):
		existing, err := p.r.cfg.Client.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		if ref := controllerOf(existing); ref == nil || string(ref.UID) != p.obj.UID() || inActiveList(p.cj, types.UID(existing.UID())) {
			return nil, nil // another's, or known
		}
		return existing, nil
	case err != nil:
		p.event(events.TypeWarning, "FailedCreate", fmt.Sprintf("Error creating job: %v", err))
		return nil, err
	}
	p.event(events.TypeNormal, "SuccessfulCreate", "Created job "+job.Name)
	return created, nil
}

// jobFor is the Job of the schedule at t, as kube's getJobFromTemplate2 makes it.
func (p *cronJobPass) jobFor(t time.Time) (*batchv1.Job, error) {
	cj := p.cj
	loc, err := time.LoadLocation(deref(cj.Spec.TimeZone))
	if err != nil {
		return nil, err
	}
	annotations := maps.Clone(cj.Spec.JobTemplate.Annotations)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[batchv1.CronJobScheduledTimestampAnnotation] = t.In(loc).Format(time.RFC3339)
	lbls := maps.Clone(cj.Spec.JobTemplate.Labels)
	job := &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{Name: cronJobJobName(cj.Name, t), Namespace: cj.Namespace, Labels: lbls, Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{controllerRef(CronJobOwner, cj.Name, p.obj.UID())}},
	}
	cj.Spec.JobTemplate.Spec.DeepCopyInto(&job.Spec)
	return job, nil
}

// cronJobJobName is kube's getJobName: the CronJob's name and the scheduled time in minutes
// since the epoch.
func cronJobJobName(cronJob string, t time.Time) string {
	return fmt.Sprintf("%s-%d", cronJob, t.Unix()/60)
}

// formatSchedule is kube's: the schedule with its timeZone as a TZ= prefix. opemu adds TZ=UTC
// when there is neither (kube-controller-manager's local time is UTC on a cluster; the host
// running opemu may be elsewhere).
func (p *cronJobPass) formatSchedule() string {
	cj := p.cj
	if strings.Contains(cj.Spec.Schedule, "TZ") {
		p.event(events.TypeWarning, "UnsupportedSchedule", fmt.Sprintf("CRON_TZ or TZ used in schedule %q is not officially supported, see https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/ for more details", cj.Spec.Schedule))
		return cj.Spec.Schedule
	}
	if cj.Spec.TimeZone != nil {
		return "TZ=" + *cj.Spec.TimeZone + " " + cj.Spec.Schedule
	}
	return "TZ=UTC " + cj.Spec.Schedule
}

// missed is how many schedules mostRecentSchedule found unmet.
type missed int

const (
	noneMissed missed = iota
	fewMissed
	manyMissed
)

// mostRecentSchedule is kube's mostRecentScheduleTime: from the last schedule (or the
// creation), bounded by startingDeadlineSeconds when withDeadline, the earliest time
// considered, the most recent schedule not after now (nil: none), and how many were missed.
// The count is kube's estimate (the gap between the first two schedules), and so is the walk
// to the most recent one.
func (p *cronJobPass) mostRecentSchedule(sched cron.Schedule, withDeadline bool) (time.Time, *time.Time, missed, error) {
	cj, now := p.cj, p.now
	earliest := cj.CreationTimestamp.Time
	if cj.Status.LastScheduleTime != nil {
		earliest = cj.Status.LastScheduleTime.Time
	}
	if d := cj.Spec.StartingDeadlineSeconds; withDeadline && d != nil {
		if deadline := now.Add(-time.Duration(*d) * time.Second); deadline.After(earliest) {
			earliest = deadline
		}
	}
	t1 := sched.Next(earliest)
	t2 := sched.Next(t1)
	if now.Before(t1) {
		return earliest, nil, noneMissed, nil
	}
	if now.Before(t2) {
		return earliest, &t1, noneMissed, nil
	}
	gap := int64(t2.Sub(t1).Round(time.Second).Seconds())
	if gap < 1 {
		return earliest, nil, noneMissed, errors.New("time difference between two schedules is less than 1 second")
	}
	n := int64(now.Sub(t1).Seconds())/gap + 1
	var recent time.Time
	// From one gap before the estimate, walked with the schedule itself (irregular schedules).
	for t := sched.Next(t1.Add(time.Duration((n-2)*gap) * time.Second)); !t.After(now); t = sched.Next(t) {
		recent = t
	}
	m := fewMissed
	if n > 100 {
		m = manyMissed
	}
	if recent.IsZero() {
		return earliest, nil, m, nil
	}
	return earliest, &recent, m, nil
}

// nextScheduleTime is kube's: the most recent unmet schedule, nil when none; too many missed
// is a TooManyMissedTimes Event.
func (p *cronJobPass) nextScheduleTime(sched cron.Schedule) (*time.Time, error) {
	_, recent, m, err := p.mostRecentSchedule(sched, true)
	if recent == nil || recent.After(p.now) {
		return nil, err
	}
	if m == manyMissed {
		p.event(events.TypeWarning, "TooManyMissedTimes", "too many missed start times. Set or decrease .spec.startingDeadlineSeconds or check clock skew")
	}
	return recent, err
}

// nextScheduleIn is kube's nextScheduleTimeDuration: how long until the schedule after the
// most recent one (padded by nextScheduleDelta).
func (p *cronJobPass) nextScheduleIn(sched cron.Schedule) time.Duration {
	earliest, recent, m, err := p.mostRecentSchedule(sched, false)
	from := p.now
	switch {
	case err != nil:
	case recent != nil:
		from = *recent
	case m == noneMissed:
		from = earliest
	}
	return sched.Next(from).Add(nextScheduleDelta).Sub(p.now)
}

// cleanup is kube's cleanupFinishedJobs: the finished Jobs beyond the history limits
// (successful and failed apart) are deleted, oldest start first.
func (p *cronJobPass) cleanup(ctx context.Context, jobs []*batchv1.Job) {
	cj := p.cj
	if cj.Spec.SuccessfulJobsHistoryLimit == nil && cj.Spec.FailedJobsHistoryLimit == nil {
		return
	}
	var succeeded, failed []*batchv1.Job
	for _, j := range jobs {
		switch finished, c := jobFinishedCondition(j); {
		case finished && c == batchv1.JobComplete:
			succeeded = append(succeeded, j)
		case finished && c == batchv1.JobFailed:
			failed = append(failed, j)
		}
	}
	for _, group := range []struct {
		jobs  []*batchv1.Job
		limit *int32
	}{{succeeded, cj.Spec.SuccessfulJobsHistoryLimit}, {failed, cj.Spec.FailedJobsHistoryLimit}} {
		if group.limit == nil || len(group.jobs) <= int(*group.limit) {
			continue
		}
		slices.SortFunc(group.jobs, byJobStartTime)
		for _, j := range group.jobs[:len(group.jobs)-int(*group.limit)] {
			_ = p.deleteJob(ctx, j) // a failure is its Event; the next pass tries again
		}
	}
}

// byJobStartTime orders Jobs as kube's byJobStartTime: by status.startTime (none last), then
// by name.
func byJobStartTime(a, b *batchv1.Job) int {
	as, bs := a.Status.StartTime, b.Status.StartTime
	switch {
	case as == nil && bs != nil:
		return 1
	case as != nil && bs == nil:
		return -1
	case as == nil || as.Equal(bs):
		return strings.Compare(a.Name, b.Name)
	case as.Before(bs):
		return -1
	}
	return 1
}

// deleteJob deletes j in the background (its Pods with it), as kube's deleteJob does, and
// takes it off the active list.
func (p *cronJobPass) deleteJob(ctx context.Context, j *batchv1.Job) error {
	key := cache.Key{Group: JobResource.Group, Resource: JobResource.Resource, Namespace: j.Namespace, Name: j.Name}
	_, _, err := p.r.cfg.Client.DeletePropagating(ctx, key, cache.Preconditions{UID: string(j.UID)}, metav1.DeletePropagationBackground)
	if err != nil && !errors.Is(err, cache.ErrNotFound) {
		p.event(events.TypeWarning, "FailedDelete", fmt.Sprintf("Deleted job: %v", err))
		return err
	}
	removeFromActiveList(p.cj, j.UID)
	p.event(events.TypeNormal, "SuccessfulDelete", "Deleted job "+j.Name)
	return nil
}

func (p *cronJobPass) event(typ, reason, msg string) {
	recordEvent(context.Background(), p.r.cfg, p.obj, "batch/v1", "CronJob", cronJobSource, typ, reason, msg)
}

// jobFinishedCondition is kube's FinishedCondition: whether j is Complete or Failed, and which.
func jobFinishedCondition(j *batchv1.Job) (bool, batchv1.JobConditionType) {
	for _, c := range j.Status.Conditions {
		if (c.Type == batchv1.JobComplete || c.Type == batchv1.JobFailed) && c.Status == corev1.ConditionTrue {
			return true, c.Type
		}
	}
	return false, ""
}

func inActiveList(cj *batchv1.CronJob, uid types.UID) bool {
	return slices.ContainsFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == uid })
}

func removeFromActiveList(cj *batchv1.CronJob, uid types.UID) {
	cj.Status.Active = slices.DeleteFunc(cj.Status.Active, func(r corev1.ObjectReference) bool { return r.UID == uid })
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// errOr is err, or an error saying msg when err is nil.
func errOr(err error, msg string) error {
	if err != nil {
		return err
	}
	return errors.New(msg)
}
