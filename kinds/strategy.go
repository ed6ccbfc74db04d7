package kinds

import (
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// What kube-apiserver's API strategies (k8s.io/kubernetes/pkg/registry/*) and default admission
// plugins fill on create and update, beyond the defaults of defaults.go: a Job's generated
// selector, a DaemonSet's template generation, a claim's protection finalizer.

// PVCProtectionFinalizer is the finalizer kube-apiserver's StorageObjectInUseProtection
// admission gives every PersistentVolumeClaim: kube-controller-manager's pvc-protection
// controller removes it once no pod uses the claim, so a claim in use is not deleted under
// its pods.
const PVCProtectionFinalizer = "kubernetes.io/pvc-protection"

// protectPVC adds PVCProtectionFinalizer to a new claim unless it has it.
func protectPVC(obj map[string]any) {
	md, ok := objectAt(obj, "metadata")
	if !ok {
		return
	}
	finalizers, ok := md["finalizers"].([]any)
	if !ok && md["finalizers"] != nil {
		return // not a list: validation refuses it
	}
	for _, f := range finalizers {
		if f == PVCProtectionFinalizer {
			return
		}
	}
	md["finalizers"] = append(finalizers, PVCProtectionFinalizer)
}

// jobDeleteWarning is the warning of a batch/v1 Job's DELETE without a propagation policy,
// whose default keeps the Job's pods.
const jobDeleteWarning = "child pods are preserved by default when jobs are deleted; " +
	"set propagationPolicy=Background to remove them or set propagationPolicy=Orphan to suppress this warning"

// generateJobSelector is the job strategy's generateSelectorIfNeeded, once the new Job has its
// name and uid: unless manualSelector, the template gets the job-name and controller-uid
// labels (legacy and batch.kubernetes.io/ ones) and a missing selector selects the uid. A Job
// without labels shows its template's, as kube-apiserver's defaulting gives every read.
func generateJobSelector(obj map[string]any) {
	md, _ := obj["metadata"].(map[string]any)
	spec, ok := objectAt(obj, "spec")
	if !ok || md == nil {
		return
	}
	manual, isBool := spec["manualSelector"].(bool)
	if !isBool {
		if spec["manualSelector"] != nil {
			return
		}
		spec["manualSelector"] = false
	}
	if manual {
		return
	}
	template, ok := objectAt(spec, "template")
	if !ok {
		return
	}
	tmd, ok := objectAt(template, "metadata")
	if !ok {
		return
	}
	labels, ok := objectAt(tmd, "labels")
	if !ok {
		return
	}
	name, _ := md["name"].(string)
	uid, _ := md["uid"].(string)
	for _, l := range []struct{ key, value string }{{legacyJobNameLabel, name}, {jobNameLabel, name}, {legacyJobUIDLabel, uid}, {jobControllerUIDLabel, uid}} {
		if _, found := labels[l.key]; !found {
			labels[l.key] = l.value
		}
	}
	if spec["selector"] == nil {
		spec["selector"] = map[string]any{"matchLabels": map[string]any{jobControllerUIDLabel: uid}}
	}
	if own, _ := md["labels"].(map[string]any); len(own) == 0 {
		copied := make(map[string]any, len(labels))
		for k, v := range labels {
			copied[k] = v
		}
		md["labels"] = copied
	}
}

// templateGeneration is the annotation the v1 DaemonSet keeps its internal
// spec.templateGeneration in.
const templateGeneration = appsv1.DeprecatedTemplateGeneration

// firstTemplateGeneration is the DaemonSet strategy's PrepareForCreate: a template generation
// of at least 1.
func firstTemplateGeneration(obj map[string]any) {
	md, ok := objectAt(obj, "metadata")
	if !ok {
		return
	}
	annotations, ok := objectAt(md, "annotations")
	if !ok {
		return
	}
	if s, _ := annotations[templateGeneration].(string); parseGeneration(s) < 1 {
		annotations[templateGeneration] = "1"
	}
}

// templateGenerationView is the DaemonSet's ManagedView: apps/v1's conversion from the
// internal DaemonSet writes the template generation annotation whatever it is (0 when the
// object has none yet), so kube-apiserver's field manager sees it on every create and update.
func templateGenerationView(obj map[string]any) {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	annotations, _ := md["annotations"].(map[string]any)
	if _, has := annotations[templateGeneration]; has {
		return
	}
	if md["annotations"] != nil && annotations == nil {
		return // not a map: validation refuses it
	}
	next := make(map[string]any, len(annotations)+1)
	for k, v := range annotations {
		next[k] = v
	}
	next[templateGeneration] = "0"
	md["annotations"] = next
}

// nextTemplateGeneration is the DaemonSet strategy's PrepareForUpdate: the template generation
// is the stored one, plus one when the template changed.
func nextTemplateGeneration(obj, old map[string]any) {
	oldMD, _ := old["metadata"].(map[string]any)
	oldAnnotations, _ := oldMD["annotations"].(map[string]any)
	oldValue, had := oldAnnotations[templateGeneration].(string)
	gen := parseGeneration(oldValue)
	if !sameTemplate(obj, old) {
		gen++
		had = true
	}
	md, ok := objectAt(obj, "metadata")
	if !ok {
		return
	}
	annotations, ok := objectAt(md, "annotations")
	if !ok {
		return
	}
	if had {
		annotations[templateGeneration] = strconv.FormatInt(gen, 10)
	} else {
		delete(annotations, templateGeneration)
	}
}

func parseGeneration(s string) int64 {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// sameTemplate compares the pod templates of an update and of the stored object, with the
// update's defaulted as the stored one was.
func sameTemplate(obj, old map[string]any) bool {
	var next, prev appsv1.DaemonSet
	if fromMap(obj, &next) != nil || fromMap(old, &prev) != nil {
		return false
	}
	defaultPodTemplate(&next.Spec.Template)
	return apiequality.Semantic.DeepEqual(next.Spec.Template, prev.Spec.Template)
}

// defaultJobLabels is SetDefaults_Job's: a Job without labels takes its template's.
func defaultJobLabels(j *batchv1.Job) {
	if len(j.Labels) == 0 && j.Spec.Template.Labels != nil {
		j.Labels = make(map[string]string, len(j.Spec.Template.Labels))
		for k, v := range j.Spec.Template.Labels {
			j.Labels[k] = v
		}
	}
}

// statefulSetMaxUnavailable is SetDefaults_StatefulSet's with MaxUnavailableStatefulSet on (as
// in v1.37): a rolling update takes down one pod at a time.
func statefulSetMaxUnavailable(s *appsv1.StatefulSet) {
	if ru := s.Spec.UpdateStrategy.RollingUpdate; s.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType && ru != nil && ru.MaxUnavailable == nil {
		one := intstr.FromInt32(1)
		ru.MaxUnavailable = &one
	}
}

// defaultPodStatus is SetDefaults_PodStatus: podIP and podIPs agree, podIP authoritative.
func defaultPodStatus(st *corev1.PodStatus) {
	switch {
	case st.PodIP != "" && len(st.PodIPs) == 0, st.PodIP != "" && st.PodIPs[0].IP != st.PodIP:
		st.PodIPs = []corev1.PodIP{{IP: st.PodIP}}
	case st.PodIP == "" && len(st.PodIPs) > 0:
		st.PodIP = st.PodIPs[0].IP
	}
}

// defaultLoadBalancerIPMode is SetDefaults_Service's: a LoadBalancer Service's ingress IPs
// are VIPs unless they say otherwise.
func defaultLoadBalancerIPMode(svc *corev1.Service) {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return
	}
	for i, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" && ing.IPMode == nil {
			vip := corev1.LoadBalancerIPModeVIP
			svc.Status.LoadBalancer.Ingress[i].IPMode = &vip
		}
	}
}
