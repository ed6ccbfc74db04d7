package v2

import (
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	v1 "github.com/opemu/opemu/examples/cronjob-multiversion/api/v1"
)

// v2 is a spoke of the v1 hub (controller-runtime's conversion.Convertible): the webhook
// converts v2 → v1 → any version and back. Only the schedule differs between the two.

// ConvertTo converts this CronJob into the hub, v1: the schedule's fields joined, "*" for
// those left out.
func (src *CronJob) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*v1.CronJob)
	if !ok {
		return fmt.Errorf("v2 converts to v1 only, not %T", dstRaw)
	}
	s := src.Spec.Schedule
	fields := make([]string, 0, 5)
	for _, f := range []*CronField{s.Minute, s.Hour, s.DayOfMonth, s.Month, s.DayOfWeek} {
		if f == nil || *f == "" {
			fields = append(fields, "*")
		} else {
			fields = append(fields, string(*f))
		}
	}
	dst.ObjectMeta = src.ObjectMeta
	dst.Spec = v1.CronJobSpec{
		Schedule:                strings.Join(fields, " "),
		StartingDeadlineSeconds: src.Spec.StartingDeadlineSeconds,
		ConcurrencyPolicy:       src.Spec.ConcurrencyPolicy,
		Suspend:                 src.Spec.Suspend,
	}
	dst.Status = v1.CronJobStatus{LastScheduleTime: src.Status.LastScheduleTime}
	return nil
}

// ConvertFrom converts the hub, v1, into this CronJob: the schedule split into its five
// fields. A schedule that is not five fields is an error (the webhook's answer fails).
func (dst *CronJob) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*v1.CronJob)
	if !ok {
		return fmt.Errorf("v2 converts from v1 only, not %T", srcRaw)
	}
	parts := strings.Fields(src.Spec.Schedule)
	if len(parts) != 5 {
		return fmt.Errorf("schedule %q does not have five fields", src.Spec.Schedule)
	}
	field := func(s string) *CronField {
		f := CronField(s)
		return &f
	}
	dst.ObjectMeta = src.ObjectMeta
	dst.Spec = CronJobSpec{
		Schedule: CronSchedule{
			Minute: field(parts[0]), Hour: field(parts[1]), DayOfMonth: field(parts[2]),
			Month: field(parts[3]), DayOfWeek: field(parts[4]),
		},
		StartingDeadlineSeconds: src.Spec.StartingDeadlineSeconds,
		ConcurrencyPolicy:       src.Spec.ConcurrencyPolicy,
		Suspend:                 src.Spec.Suspend,
	}
	dst.Status = CronJobStatus{LastScheduleTime: src.Status.LastScheduleTime}
	return nil
}
