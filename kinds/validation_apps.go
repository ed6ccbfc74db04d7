package kinds

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The workloads (apps/v1 and batch/v1) as kube-apiserver validates them
// (k8s.io/kubernetes/pkg/apis/apps/validation and batch/validation): their specs, their pod
// templates (validation_pod.go), and on update what may not change.

var specPath = field.NewPath("spec")

func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	s := &d.Spec
	errs := nonNegative(int64(ptrOr(s.Replicas)), specPath.Child("replicas"))
	errs = append(errs, validateControllerSelector(s.Selector, "deployment")...)
	errs = append(errs, validateReplicaSetTemplate(s.Selector, &s.Template, "ReplicaSet")...)
	errs = append(errs, validateDeploymentStrategy(&s.Strategy, specPath.Child("strategy"))...)
	errs = append(errs, nonNegative(int64(s.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*s.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	if p := s.ProgressDeadlineSeconds; p != nil {
		errs = append(errs, nonNegative(int64(*p), specPath.Child("progressDeadlineSeconds"))...)
		if *p <= s.MinReadySeconds {
			errs = append(errs, field.Invalid(specPath.Child("progressDeadlineSeconds"), p, "must be greater than minReadySeconds"))
		}
	}
	return errs
}

func validateDeploymentUpdate(d, old *appsv1.Deployment) field.ErrorList {
	return immutable(d.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))
}

func validateDeploymentStrategy(s *appsv1.DeploymentStrategy, p *field.Path) field.ErrorList {
	switch s.Type {
	case appsv1.RecreateDeploymentStrategyType:
		if s.RollingUpdate != nil {
			return field.ErrorList{field.Forbidden(p.Child("rollingUpdate"), "may not be specified when strategy `type` is 'Recreate'")}
		}
	case appsv1.RollingUpdateDeploymentStrategyType:
		ru := s.RollingUpdate
		if ru == nil {
			return field.ErrorList{field.Required(p.Child("rollingUpdate"), "this should be defaulted and never be nil")}
		}
		rp := p.Child("rollingUpdate")
		unavailable, surge := ptrOr(ru.MaxUnavailable), ptrOr(ru.MaxSurge)
		errs := positiveIntOrPercent(unavailable, rp.Child("maxUnavailable"))
		errs = append(errs, positiveIntOrPercent(surge, rp.Child("maxSurge"))...)
		if intOrPercentValue(unavailable) == 0 && intOrPercentValue(surge) == 0 {
			errs = append(errs, field.Invalid(rp.Child("maxUnavailable"), unavailable, "may not be 0 when `maxSurge` is 0"))
		}
		return append(errs, notMoreThan100Percent(unavailable, rp.Child("maxUnavailable"))...)
	default:
		return field.ErrorList{field.NotSupported(p, internal(s), []string{string(appsv1.RecreateDeploymentStrategyType), string(appsv1.RollingUpdateDeploymentStrategyType)})}
	}
	return nil
}

func validateReplicaSet(r *appsv1.ReplicaSet) field.ErrorList {
	s := &r.Spec
	errs := nonNegative(int64(ptrOr(s.Replicas)), specPath.Child("replicas"))
	errs = append(errs, nonNegative(int64(s.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	errs = append(errs, validateControllerSelector(s.Selector, "deployment")...) // sic: kube-apiserver's word
	return append(errs, validateReplicaSetTemplate(s.Selector, &s.Template, "ReplicaSet")...)
}

func validateReplicaSetUpdate(r, old *appsv1.ReplicaSet) field.ErrorList {
	return immutable(r.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))
}

// validateControllerSelector checks a Deployment's or ReplicaSet's (or StatefulSet's) selector;
// a missing one is a required field (typedSchema.Validate).
func validateControllerSelector(sel *metav1.LabelSelector, kind string) field.ErrorList {
	if sel == nil {
		return nil
	}
	errs := metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))
	if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(specPath.Child("selector"), sel, "empty selector is invalid for "+kind))
	}
	return errs
}

// validateReplicaSetTemplate is ValidatePodTemplateSpecForReplicaSet (kind names the
// activeDeadlineSeconds message: "ReplicaSet", "StatefulSet").
func validateReplicaSetTemplate(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec, kind string) field.ErrorList {
	if sel == nil {
		return nil
	}
	p := specPath.Child("template")
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return field.ErrorList{field.Invalid(specPath.Child("selector"), sel, "invalid label selector")}
	}
	var errs field.ErrorList
	if !selector.Empty() && !selector.Matches(labels.Set(t.Labels)) {
		errs = append(errs, field.Invalid(p.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
	}
	errs = append(errs, validatePodTemplate(t, p)...)
	if t.Spec.RestartPolicy != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(p.Child("spec", "restartPolicy"), t.Spec.RestartPolicy, []string{string(corev1.RestartPolicyAlways)}))
	}
	if t.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(p.Child("spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in "+kind+" is not Supported"))
	}
	return errs
}

func validateStatefulSet(ss *appsv1.StatefulSet) field.ErrorList {
	s := &ss.Spec
	var errs field.ErrorList
	switch s.PodManagementPolicy {
	case "":
		errs = append(errs, field.Required(specPath.Child("podManagementPolicy"), ""))
	case appsv1.OrderedReadyPodManagement, appsv1.ParallelPodManagement:
	default:
		errs = append(errs, field.Invalid(specPath.Child("podManagementPolicy"), s.PodManagementPolicy, "must be 'OrderedReady' or 'Parallel'"))
	}
	up := specPath.Child("updateStrategy")
	switch s.UpdateStrategy.Type {
	case "":
		errs = append(errs, field.Required(up, ""))
	case appsv1.OnDeleteStatefulSetStrategyType:
		if s.UpdateStrategy.RollingUpdate != nil {
			errs = append(errs, field.Invalid(up.Child("rollingUpdate"), internal(s.UpdateStrategy.RollingUpdate), "only allowed for updateStrategy 'RollingUpdate'"))
		}
	case appsv1.RollingUpdateStatefulSetStrategyType:
		if ru := s.UpdateStrategy.RollingUpdate; ru != nil {
			rp := up.Child("rollingUpdate")
			errs = append(errs, nonNegative(int64(ptrOr(ru.Partition)), rp.Child("partition"))...)
			if mu := ru.MaxUnavailable; mu != nil {
				errs = append(errs, positiveIntOrPercent(*mu, rp.Child("maxUnavailable"))...)
				if intOrPercentValue(*mu) == 0 {
					errs = append(errs, field.Invalid(rp.Child("maxUnavailable"), *mu, "cannot be 0"))
				}
				errs = append(errs, notMoreThan100Percent(*mu, rp.Child("maxUnavailable"))...)
			}
		}
	default:
		errs = append(errs, field.Invalid(up, internal(s.UpdateStrategy), "must be 'RollingUpdate' or 'OnDelete'"))
	}
	if pol := s.PersistentVolumeClaimRetentionPolicy; pol != nil {
		pp := specPath.Child("persistentVolumeClaimRetentionPolicy")
		for _, f := range []struct {
			name string
			v    appsv1.PersistentVolumeClaimRetentionPolicyType
		}{{"whenDeleted", pol.WhenDeleted}, {"whenScaled", pol.WhenScaled}} {
			if f.v != appsv1.RetainPersistentVolumeClaimRetentionPolicyType && f.v != appsv1.DeletePersistentVolumeClaimRetentionPolicyType {
				errs = append(errs, field.NotSupported(pp.Child(f.name), f.v, []string{string(appsv1.RetainPersistentVolumeClaimRetentionPolicyType), string(appsv1.DeletePersistentVolumeClaimRetentionPolicyType)}))
			}
		}
	}
	for i := range s.VolumeClaimTemplates {
		errs = append(errs, validatePVCSpec(&s.VolumeClaimTemplates[i].Spec, specPath.Child("volumeClaimTemplates").Index(i).Child("spec"))...)
	}
	errs = append(errs, nonNegative(int64(ptrOr(s.Replicas)), specPath.Child("replicas"))...)
	errs = append(errs, nonNegative(int64(s.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	if s.Ordinals != nil {
		errs = append(errs, nonNegative(int64(s.Ordinals.Start), specPath.Child("ordinals.start"))...)
	}
	if s.ServiceName != "" {
		errs = append(errs, dnsLabel(s.ServiceName, specPath.Child("serviceName"))...)
	}
	if sel := s.Selector; sel != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))...)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(specPath.Child("selector"), sel, "empty selector is invalid for statefulset"))
		}
		if selector, err := metav1.LabelSelectorAsSelector(sel); err != nil {
			errs = append(errs, field.Invalid(specPath.Child("selector"), sel, ""))
		} else {
			t := s.Template.DeepCopy()
			// The controller sets these, and the claims' volumes: not validated.
			t.Spec.Subdomain, t.Spec.Hostname = "", ""
			for _, c := range s.VolumeClaimTemplates {
				if !hasVolume(t.Spec.Volumes, c.Name) {
					t.Spec.Volumes = append(t.Spec.Volumes, corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{
						PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.Name}}})
				}
			}
			tp := specPath.Child("template")
			if !selector.Empty() && !selector.Matches(labels.Set(t.Labels)) {
				errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), t.Labels, "`selector` does not match template `labels`"))
			}
			errs = append(errs, validatePodTemplate(t, tp)...)
			errs = append(errs, metav1validation.ValidateLabels(t.Labels, tp.Child("labels"))...)
			errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, tp.Child("annotations"))...)
		}
	}
	if rp := s.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(specPath.Child("template", "spec", "restartPolicy"), rp, []string{string(corev1.RestartPolicyAlways)}))
	}
	if s.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(specPath.Child("template", "spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in StatefulSet is not Supported"))
	}
	return errs
}

func hasVolume(vols []corev1.Volume, name string) bool {
	for _, v := range vols {
		if v.Name == name {
			return true
		}
	}
	return false
}

// validateStatefulSetUpdate: the selector, claims templates, service name and pod management
// policy of a StatefulSet do not change.
func validateStatefulSetUpdate(ss, old *appsv1.StatefulSet) field.ErrorList {
	errs := immutable(ss.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))
	errs = append(errs, immutableInternal(ss.Spec.VolumeClaimTemplates, old.Spec.VolumeClaimTemplates, specPath.Child("volumeClaimTemplates"))...)
	errs = append(errs, immutable(ss.Spec.ServiceName, old.Spec.ServiceName, specPath.Child("serviceName"))...)
	return append(errs, immutable(ss.Spec.PodManagementPolicy, old.Spec.PodManagementPolicy, specPath.Child("podManagementPolicy"))...)
}

func validateDaemonSet(d *appsv1.DaemonSet) field.ErrorList {
	s := &d.Spec
	errs := metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))
	if selector, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && s.Selector != nil && !selector.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(specPath.Child("template", "metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
	}
	if s.Selector != nil && len(s.Selector.MatchLabels)+len(s.Selector.MatchExpressions) == 0 {
		errs = append(errs, field.Invalid(specPath.Child("selector"), s.Selector, "empty selector is invalid for daemonset"))
	}
	errs = append(errs, validatePodTemplate(&s.Template, specPath.Child("template"))...)
	if rp := s.Template.Spec.RestartPolicy; rp != corev1.RestartPolicyAlways {
		errs = append(errs, field.NotSupported(specPath.Child("template", "spec", "restartPolicy"), rp, []string{string(corev1.RestartPolicyAlways)}))
	}
	if s.Template.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Forbidden(specPath.Child("template", "spec", "activeDeadlineSeconds"), "activeDeadlineSeconds in DaemonSet is not Supported"))
	}
	errs = append(errs, nonNegative(int64(s.MinReadySeconds), specPath.Child("minReadySeconds"))...)
	up := specPath.Child("updateStrategy")
	switch s.UpdateStrategy.Type {
	case appsv1.OnDeleteDaemonSetStrategyType:
	case appsv1.RollingUpdateDaemonSetStrategyType:
		ru := s.UpdateStrategy.RollingUpdate
		if ru == nil {
			errs = append(errs, field.Required(up.Child("rollingUpdate"), ""))
			break
		}
		rp := up.Child("rollingUpdate")
		unavailable, surge := ptrOr(ru.MaxUnavailable), ptrOr(ru.MaxSurge)
		errs = append(errs, positiveIntOrPercent(unavailable, rp.Child("maxUnavailable"))...)
		errs = append(errs, positiveIntOrPercent(surge, rp.Child("maxSurge"))...)
		errs = append(errs, notMoreThan100Percent(unavailable, rp.Child("maxUnavailable"))...)
		errs = append(errs, notMoreThan100Percent(surge, rp.Child("maxSurge"))...)
		hasUnavailable, hasSurge := intOrPercentValue(unavailable) != 0, intOrPercentValue(surge) != 0
		switch {
		case hasUnavailable && hasSurge:
			errs = append(errs, field.Invalid(rp.Child("maxSurge"), surge, "may not be set when maxUnavailable is non-zero"))
		case !hasUnavailable && !hasSurge:
			errs = append(errs, field.Required(rp.Child("maxUnavailable"), "cannot be 0 when maxSurge is 0"))
		}
	default:
		errs = append(errs, field.NotSupported(up, internal(s.UpdateStrategy), []string{string(appsv1.RollingUpdateDaemonSetStrategyType), string(appsv1.OnDeleteDaemonSetStrategyType)}))
	}
	if s.RevisionHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*s.RevisionHistoryLimit), specPath.Child("revisionHistoryLimit"))...)
	}
	return errs
}

func validateDaemonSetUpdate(d, old *appsv1.DaemonSet) field.ErrorList {
	return immutable(d.Spec.Selector, old.Spec.Selector, specPath.Child("selector"))
}

// positiveIntOrPercent is ValidatePositiveIntOrPercent.
func positiveIntOrPercent(v intstr.IntOrString, p *field.Path) field.ErrorList {
	if v.Type == intstr.String {
		var errs field.ErrorList
		for _, msg := range validation.IsValidPercent(v.StrVal) {
			errs = append(errs, field.Invalid(p, v, msg))
		}
		return errs
	}
	return nonNegative(int64(v.IntValue()), p)
}

func percentValue(v intstr.IntOrString) (int, bool) {
	if v.Type != intstr.String || len(validation.IsValidPercent(v.StrVal)) != 0 {
		return 0, false
	}
	n, _ := strconv.Atoi(v.StrVal[:len(v.StrVal)-1])
	return n, true
}

func intOrPercentValue(v intstr.IntOrString) int {
	if n, ok := percentValue(v); ok {
		return n
	}
	return v.IntValue()
}

func notMoreThan100Percent(v intstr.IntOrString, p *field.Path) field.ErrorList {
	if n, ok := percentValue(v); ok && n > 100 {
		return field.ErrorList{field.Invalid(p, v, "must not be greater than 100%")}
	}
	return nil
}

// ptrOr is *p, or T's zero value.
func ptrOr[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}

// The labels kube-apiserver gives a Job's pods, and selects them by (batchv1's, and the legacy
// ones it keeps for older controllers).
const (
	jobControllerUIDLabel = batchv1.ControllerUidLabel
	jobNameLabel          = batchv1.JobNameLabel
	legacyJobUIDLabel     = "controller-uid"
	legacyJobNameLabel    = "job-name"
)

func validateJob(j *batchv1.Job) field.ErrorList {
	return append(validateJobSpec(&j.Spec, specPath, true), validateIndexedJobName(j)...)
}

// validateGeneratedSelector checks, on create, that a generated selector and the template's
// labels are what the create generated (validateGeneratedSelector).
func validateGeneratedSelector(j *batchv1.Job) field.ErrorList {
	if ptrOr(j.Spec.ManualSelector) || j.Spec.Selector == nil {
		return nil
	}
	var errs field.ErrorList
	uid, name := string(j.UID), j.Name
	if uid == "" {
		errs = append(errs, field.Required(field.NewPath("metadata", "uid"), ""))
	}
	mp := specPath.Child("template", "metadata")
	for _, l := range []struct{ key, value string }{{legacyJobUIDLabel, uid}, {legacyJobNameLabel, name}, {jobControllerUIDLabel, uid}, {jobNameLabel, name}} {
		errs = append(errs, hasLabel(j.Spec.Template.Labels, mp, l.key, l.value)...)
	}
	expected := labels.Set{jobControllerUIDLabel: uid, jobNameLabel: name, legacyJobUIDLabel: uid, legacyJobNameLabel: name}
	if selector, err := metav1.LabelSelectorAsSelector(j.Spec.Selector); err == nil && !selector.Matches(expected) {
		errs = append(errs, field.Invalid(specPath.Child("selector"), j.Spec.Selector, "`selector` not auto-generated"))
	}
	return errs
}

// hasLabel is ValidateHasLabel.
func hasLabel(l map[string]string, p *field.Path, key, want string) field.ErrorList {
	actual, found := l[key]
	if !found {
		return field.ErrorList{field.Required(p.Child("labels").Key(key), want)}
	}
	if actual != want {
		return field.ErrorList{field.Invalid(p.Child("labels").Key(key), l, "must be '"+want+"'")}
	}
	return nil
}

func validateIndexedJobName(j *batchv1.Job) field.ErrorList {
	if ptrOr(j.Spec.CompletionMode) == batchv1.IndexedCompletion && ptrOr(j.Spec.Completions) > 0 {
		longest := fmt.Sprintf("%s-%d", j.Name, *j.Spec.Completions-1)
		if len(validation.IsDNS1123Label(longest)) > 0 {
			return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), j.Name, "will not able to create pod with invalid DNS label: "+longest)}
		}
	}
	return nil
}

// validateJobSpec is ValidateJobSpec (withSelector) or, for a CronJob's template, validateJobSpec.
func validateJobSpec(s *batchv1.JobSpec, p *field.Path, withSelector bool) field.ErrorList {
	var errs field.ErrorList
	for _, f := range []struct {
		name string
		v    *int32
	}{{"parallelism", s.Parallelism}, {"completions", s.Completions}, {"backoffLimit", s.BackoffLimit},
		{"ttlSecondsAfterFinished", s.TTLSecondsAfterFinished}, {"backoffLimitPerIndex", s.BackoffLimitPerIndex}, {"maxFailedIndexes", s.MaxFailedIndexes}} {
		if f.v != nil {
			errs = append(errs, nonNegative(int64(*f.v), p.Child(f.name))...)
		}
		if f.name == "completions" && s.ActiveDeadlineSeconds != nil {
			errs = append(errs, nonNegative(*s.ActiveDeadlineSeconds, p.Child("activeDeadlineSeconds"))...)
		}
	}
	if mode := s.CompletionMode; mode != nil {
		if *mode != batchv1.NonIndexedCompletion && *mode != batchv1.IndexedCompletion {
			errs = append(errs, field.NotSupported(p.Child("completionMode"), mode, []batchv1.CompletionMode{batchv1.NonIndexedCompletion, batchv1.IndexedCompletion}))
		}
		if *mode == batchv1.IndexedCompletion {
			if s.Completions == nil {
				errs = append(errs, field.Required(p.Child("completions"), "when completion mode is Indexed"))
			}
			if s.Parallelism != nil && *s.Parallelism > 100000 {
				errs = append(errs, field.Invalid(p.Child("parallelism"), *s.Parallelism, "must be less than or equal to 100000 when completion mode is Indexed"))
			}
		}
	}
	if ptrOr(s.CompletionMode) != batchv1.IndexedCompletion {
		if s.BackoffLimitPerIndex != nil {
			errs = append(errs, field.Invalid(p.Child("backoffLimitPerIndex"), *s.BackoffLimitPerIndex, "requires indexed completion mode"))
		}
		if s.MaxFailedIndexes != nil {
			errs = append(errs, field.Invalid(p.Child("maxFailedIndexes"), *s.MaxFailedIndexes, "requires indexed completion mode"))
		}
	}
	if rp := s.PodReplacementPolicy; rp != nil {
		if s.PodFailurePolicy != nil {
			if *rp != batchv1.Failed {
				errs = append(errs, field.NotSupported(p.Child("podReplacementPolicy"), *rp, []batchv1.PodReplacementPolicy{batchv1.Failed}))
			}
		} else if *rp != batchv1.Failed && *rp != batchv1.TerminatingOrFailed {
			errs = append(errs, field.NotSupported(p.Child("podReplacementPolicy"), *rp, []batchv1.PodReplacementPolicy{batchv1.Failed, batchv1.TerminatingOrFailed}))
		}
	}
	tp := p.Child("template")
	errs = append(errs, validatePodTemplate(&s.Template, tp)...)
	switch rp := s.Template.Spec.RestartPolicy; {
	case rp == corev1.RestartPolicyAlways || rp == "":
		errs = append(errs, field.Required(tp.Child("spec", "restartPolicy"), `valid values: "OnFailure", "Never"`))
	case rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.NotSupported(tp.Child("spec", "restartPolicy"), rp, []corev1.RestartPolicy{corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	case s.PodFailurePolicy != nil && rp != corev1.RestartPolicyNever:
		errs = append(errs, field.Invalid(tp.Child("spec", "restartPolicy"), rp, `only "Never" is supported when podFailurePolicy is specified`))
	}
	if !withSelector {
		return errs
	}
	if s.Selector == nil {
		errs = append(errs, field.Required(p.Child("selector"), ""))
	} else {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	if selector, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !selector.Matches(labels.Set(s.Template.Labels)) {
		errs = append(errs, field.Invalid(tp.Child("metadata", "labels"), s.Template.Labels, "`selector` does not match template `labels`"))
	}
	return errs
}

// validateJobUpdate: a Job's selector, completion mode and pod failure policy do not change,
// nor its completions (unless Indexed), nor its template (unless suspended and never started,
// when the scheduling directives may).
func validateJobUpdate(j, old *batchv1.Job) field.ErrorList {
	s, os := &j.Spec, &old.Spec
	var errs field.ErrorList
	switch {
	case ptrOr(s.CompletionMode) != batchv1.IndexedCompletion:
		errs = append(errs, immutable(s.Completions, os.Completions, specPath.Child("completions"))...)
	case s.Completions != nil && !apiequality.Semantic.DeepEqual(s.Completions, os.Completions) && *s.Completions != ptrOr(s.Parallelism):
		errs = append(errs, field.Invalid(specPath.Child("completions"), s.Completions, "can only be modified in tandem with spec.parallelism"))
	}
	errs = append(errs, immutable(s.Selector, os.Selector, specPath.Child("selector"))...)
	errs = append(errs, validateJobTemplateUpdate(s, os, mutableJobTemplate(old))...)
	errs = append(errs, immutable(s.CompletionMode, os.CompletionMode, specPath.Child("completionMode"))...)
	errs = append(errs, immutableInternal(s.PodFailurePolicy, os.PodFailurePolicy, specPath.Child("podFailurePolicy"))...)
	errs = append(errs, immutable(s.BackoffLimitPerIndex, os.BackoffLimitPerIndex, specPath.Child("backoffLimitPerIndex"))...)
	errs = append(errs, immutable(s.ManagedBy, os.ManagedBy, specPath.Child("managedBy"))...)
	return append(errs, immutableInternal(s.SuccessPolicy, os.SuccessPolicy, specPath.Child("successPolicy"))...)
}

// validateJobTemplateUpdate is validatePodTemplateUpdate: a Job's template does not change,
// but while mutable (suspended, never started) its scheduling directives and its containers'
// resources may.
func validateJobTemplateUpdate(s, os *batchv1.JobSpec, mutable bool) field.ErrorList {
	prev := os.Template.DeepCopy()
	if mutable {
		t := &s.Template
		prev.Labels, prev.Annotations = t.Labels, t.Annotations
		prev.Spec.NodeSelector, prev.Spec.Tolerations, prev.Spec.SchedulingGates = t.Spec.NodeSelector, t.Spec.Tolerations, t.Spec.SchedulingGates
		switch {
		case t.Spec.Affinity == nil && prev.Spec.Affinity != nil:
			prev.Spec.Affinity.NodeAffinity = nil
			if *prev.Spec.Affinity == (corev1.Affinity{}) {
				prev.Spec.Affinity = nil
			}
		case t.Spec.Affinity != nil && prev.Spec.Affinity == nil:
			prev.Spec.Affinity = &corev1.Affinity{NodeAffinity: t.Spec.Affinity.NodeAffinity}
		case t.Spec.Affinity != nil:
			prev.Spec.Affinity.NodeAffinity = t.Spec.Affinity.NodeAffinity
		}
	}
	if !ptrOr(os.Suspend) || !mutable {
		return immutableInternal(&s.Template, prev, specPath.Child("template"))
	}
	for _, cs := range []struct{ now, was []corev1.Container }{{s.Template.Spec.Containers, prev.Spec.Containers}, {s.Template.Spec.InitContainers, prev.Spec.InitContainers}} {
		if len(cs.now) != len(cs.was) {
			continue
		}
		for i := range cs.now {
			if cs.was[i].Name == cs.now[i].Name {
				cs.was[i].Resources = cs.now[i].Resources
			}
		}
	}
	return immutableInternal(&s.Template.Spec, &prev.Spec, specPath.Child("template.spec"))
}

// mutableJobTemplate: a suspended Job that never started (or is suspended again) with no
// active pods may change its template (MutablePodResourcesForSuspendedJobs and
// MutableSchedulingDirectivesForSuspendedJobs).
func mutableJobTemplate(old *batchv1.Job) bool {
	if !ptrOr(old.Spec.Suspend) || old.Status.Active != 0 {
		return false
	}
	if old.Status.StartTime == nil {
		return true
	}
	for _, c := range old.Status.Conditions {
		if c.Type == batchv1.JobSuspended && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

func validateCronJob(c *batchv1.CronJob) field.ErrorList { return validateCronJobSpec(&c.Spec, nil) }

// validateCronJobName: a new CronJob's name leaves room for the 11 characters its Jobs' names
// add (updates are spared, so older CronJobs can still be deleted).
func validateCronJobName(c *batchv1.CronJob) field.ErrorList {
	if len(c.Name) > validation.DNS1035LabelMaxLength-11 {
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), c.Name, "must be no more than 52 characters")}
	}
	return nil
}

func validateCronJobSpec(s *batchv1.CronJobSpec, old *batchv1.CronJobSpec) field.ErrorList {
	var errs field.ErrorList
	if s.Schedule == "" {
		errs = append(errs, field.Required(specPath.Child("schedule"), ""))
	} else {
		errs = append(errs, validateSchedule(s.Schedule, old != nil && strings.Contains(old.Schedule, "TZ"), s.TimeZone)...)
	}
	if s.StartingDeadlineSeconds != nil {
		errs = append(errs, nonNegative(*s.StartingDeadlineSeconds, specPath.Child("startingDeadlineSeconds"))...)
	}
	if old == nil || ptrOr(old.TimeZone) != ptrOr(s.TimeZone) || (old.TimeZone == nil) != (s.TimeZone == nil) {
		errs = append(errs, validateTimeZone(s.TimeZone, specPath.Child("timeZone"))...)
	}
	errs = append(errs, oneOf(specPath.Child("concurrencyPolicy"), s.ConcurrencyPolicy, batchv1.AllowConcurrent, batchv1.ForbidConcurrent, batchv1.ReplaceConcurrent)...)
	jp := specPath.Child("jobTemplate")
	errs = append(errs, validateJobSpec(&s.JobTemplate.Spec, jp.Child("spec"), false)...)
	if s.JobTemplate.Spec.Selector != nil {
		errs = append(errs, field.Invalid(jp.Child("spec", "selector"), s.JobTemplate.Spec.Selector, "`selector` will be auto-generated"))
	}
	if ptrOr(s.JobTemplate.Spec.ManualSelector) {
		errs = append(errs, field.NotSupported(jp.Child("spec", "manualSelector"), s.JobTemplate.Spec.ManualSelector, []string{"nil", "false"}))
	}
	if s.SuccessfulJobsHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*s.SuccessfulJobsHistoryLimit), specPath.Child("successfulJobsHistoryLimit"))...)
	}
	if s.FailedJobsHistoryLimit != nil {
		errs = append(errs, nonNegative(int64(*s.FailedJobsHistoryLimit), specPath.Child("failedJobsHistoryLimit"))...)
	}
	return errs
}

// validateSchedule parses a CronJob's schedule as the CronJob controller does (robfig/cron's
// standard parser, kube's choice).
func validateSchedule(schedule string, allowTZ bool, timeZone *string) field.ErrorList {
	p := specPath.Child("schedule")
	var errs field.ErrorList
	if err := parseSchedule(schedule); err != nil {
		errs = append(errs, field.Invalid(p, schedule, err.Error()))
	}
	switch {
	case allowTZ && strings.Contains(schedule, "TZ") && timeZone != nil:
		errs = append(errs, field.Invalid(p, schedule, "cannot use both timeZone field and TZ or CRON_TZ in schedule"))
	case !allowTZ && strings.Contains(schedule, "TZ"):
		errs = append(errs, field.Invalid(p, schedule, "cannot use TZ or CRON_TZ in schedule, use timeZone field instead"))
	}
	return errs
}

func parseSchedule(schedule string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("invalid schedule format: %v", r)
		}
	}()
	_, err = cron.ParseStandard(schedule)
	return err
}

var timeZoneCharacters = regexp.MustCompile(`^[A-Za-z\.\-_0-9+]{1,14}$`)

// validateTimeZone is validateTimeZone: an IANA name the server's time zone database knows.
func validateTimeZone(tz *string, p *field.Path) field.ErrorList {
	if tz == nil {
		return nil
	}
	if *tz == "" {
		return field.ErrorList{field.Invalid(p, tz, "timeZone must be nil or non-empty string")}
	}
	for _, part := range strings.Split(*tz, "/") {
		if part == "." || part == ".." || strings.HasPrefix(part, "-") || !timeZoneCharacters.MatchString(part) {
			return field.ErrorList{field.Invalid(p, tz, "unknown time zone "+*tz)}
		}
	}
	var errs field.ErrorList
	if strings.EqualFold(*tz, "Local") {
		errs = append(errs, field.Invalid(p, tz, "timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones"))
	}
	if _, err := time.LoadLocation(*tz); err != nil {
		errs = append(errs, field.Invalid(p, tz, err.Error()))
	}
	return errs
}

// immutable is ValidateImmutableField: a change of the value at p is refused, showing the new
// value as the API type encodes it.
func immutable(v, old any, p *field.Path) field.ErrorList {
	if apiequality.Semantic.DeepEqual(old, v) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, v, apivalidation.FieldImmutableErrorMsg)}
}

// immutableInternal is immutable for values kube-apiserver shows in its internal types' form,
// without JSON names ({"Name":...}: a Job's template, a RoleBinding's roleRef).
func immutableInternal(v, old any, p *field.Path) field.ErrorList {
	if apiequality.Semantic.DeepEqual(old, v) {
		return nil
	}
	return field.ErrorList{field.Invalid(p, internal(v), apivalidation.FieldImmutableErrorMsg)}
}
