// Package v2 is batch.tutorial.kubebuilder.io/v2, the CronJob's second version: the schedule
// is five named fields instead of one string. Objects are stored as v1; v2 is converted to
// and from it by the operator's conversion webhook (conversion.go).
package v2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "batch.tutorial.kubebuilder.io", Version: "v2"}
	// SchemeBuilder adds the CronJob kinds of this version to a scheme.
	SchemeBuilder = (&scheme.Builder{GroupVersion: GroupVersion}).Register(&CronJob{}, &CronJobList{})
	// AddToScheme adds the kinds of this version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// CronField is one field of a cron schedule: "*", "5", "*/10", "1-5".
type CronField string

// CronSchedule is a cron schedule field by field; a field left out means "*".
type CronSchedule struct {
	Minute     *CronField `json:"minute,omitempty"`
	Hour       *CronField `json:"hour,omitempty"`
	DayOfMonth *CronField `json:"dayOfMonth,omitempty"`
	Month      *CronField `json:"month,omitempty"`
	DayOfWeek  *CronField `json:"dayOfWeek,omitempty"`
}

// CronJobSpec is what the CronJob runs when.
type CronJobSpec struct {
	// Schedule is when it runs.
	Schedule CronSchedule `json:"schedule"`
	// StartingDeadlineSeconds bounds how late a missed run may still start.
	StartingDeadlineSeconds *int64 `json:"startingDeadlineSeconds,omitempty"`
	// ConcurrencyPolicy is Allow, Forbid or Replace.
	ConcurrencyPolicy string `json:"concurrencyPolicy,omitempty"`
	// Suspend stops later runs.
	Suspend *bool `json:"suspend,omitempty"`
}

// CronJobStatus is what was observed.
type CronJobStatus struct {
	// LastScheduleTime is when a run was last started.
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
}

// CronJob runs a job on a schedule.
type CronJob struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   CronJobSpec   `json:"spec,omitempty"`
	Status CronJobStatus `json:"status,omitempty"`
}

// CronJobList is a list of CronJobs.
type CronJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CronJob `json:"items"`
}
