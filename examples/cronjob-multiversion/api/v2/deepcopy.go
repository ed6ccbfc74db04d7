package v2

import "k8s.io/apimachinery/pkg/runtime"

// The deep copies controller-gen would generate (zz_generated.deepcopy.go), written out so
// that the example builds without the generator.

// DeepCopyInto copies in into out.
func (in *CronJobSpec) DeepCopyInto(out *CronJobSpec) {
	*out = *in
	in.Schedule.DeepCopyInto(&out.Schedule)
	if in.StartingDeadlineSeconds != nil {
		out.StartingDeadlineSeconds = new(int64)
		*out.StartingDeadlineSeconds = *in.StartingDeadlineSeconds
	}
	if in.Suspend != nil {
		out.Suspend = new(bool)
		*out.Suspend = *in.Suspend
	}
}

// DeepCopyInto copies in into out.
func (in *CronSchedule) DeepCopyInto(out *CronSchedule) {
	*out = *in
	for _, f := range []struct{ from, to **CronField }{
		{&in.Minute, &out.Minute}, {&in.Hour, &out.Hour}, {&in.DayOfMonth, &out.DayOfMonth},
		{&in.Month, &out.Month}, {&in.DayOfWeek, &out.DayOfWeek},
	} {
		if *f.from != nil {
			v := **f.from
			*f.to = &v
		}
	}
}

// DeepCopyInto copies in into out.
func (in *CronJobStatus) DeepCopyInto(out *CronJobStatus) {
	*out = *in
	if in.LastScheduleTime != nil {
		out.LastScheduleTime = in.LastScheduleTime.DeepCopy()
	}
}

// DeepCopyInto copies in into out.
func (in *CronJob) DeepCopyInto(out *CronJob) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
	in.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy of in.
func (in *CronJob) DeepCopy() *CronJob {
	if in == nil {
		return nil
	}
	out := new(CronJob)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *CronJob) DeepCopyObject() runtime.Object { return in.DeepCopy() }

// DeepCopyInto copies in into out.
func (in *CronJobList) DeepCopyInto(out *CronJobList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]CronJob, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy of in.
func (in *CronJobList) DeepCopy() *CronJobList {
	if in == nil {
		return nil
	}
	out := new(CronJobList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *CronJobList) DeepCopyObject() runtime.Object { return in.DeepCopy() }
