// Package v1 is batch.tutorial.kubebuilder.io/v1, the CronJob's first version and the one it
// is stored in: the schedule is one cron string. It is the conversion hub: every other version
// converts to and from it.
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "batch.tutorial.kubebuilder.io", Version: "v1"}
	// SchemeBuilder adds the CronJob kinds of this version to a scheme.
	SchemeBuilder = (&scheme.Builder{GroupVersion: GroupVersion}).Register(&CronJob{}, &CronJobList{})
	// AddToScheme adds the kinds of this version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// CronJobSpec is what the CronJob runs when.
type CronJobSpec struct {
	// Schedule is the cron schedule, five fields: "*/5 * * * *".
	Schedule string `json:"schedule"`
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

// Hub makes v1 the version every other converts through (controller-runtime's conversion.Hub).
func (*CronJob) Hub() {}
