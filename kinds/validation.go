package kinds

import (
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks of kube-apiserver's validation (k8s.io/kubernetes/pkg/apis/*/validation) that
// operator authors meet first: a workload's selector must select its template, containers
// need a name and an image, a Job's pods may not restart Always, ports are in range, keys are
// valid. Types and required fields are checked for every typed kind (typedSchema.Validate);
// the rest of Kubernetes' validation is listed in the README's differences.

func validateDeployment(d *appsv1.Deployment) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateReplicas(d.Spec.Replicas, p.Child("replicas"))
	errs = append(errs, validateWorkload(d.Spec.Selector, &d.Spec.Template, p, corev1.RestartPolicyAlways)...)
	return errs
}

func validateReplicaSet(r *appsv1.ReplicaSet) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateReplicas(r.Spec.Replicas, p.Child("replicas"))
	return append(errs, validateWorkload(r.Spec.Selector, &r.Spec.Template, p, corev1.RestartPolicyAlways)...)
}

func validateStatefulSet(s *appsv1.StatefulSet) field.ErrorList {
	p := field.NewPath("spec")
	errs := validateReplicas(s.Spec.Replicas, p.Child("replicas"))
	return append(errs, validateWorkload(s.Spec.Selector, &s.Spec.Template, p, corev1.RestartPolicyAlways)...)
}

func validateDaemonSet(d *appsv1.DaemonSet) field.ErrorList {
	return validateWorkload(d.Spec.Selector, &d.Spec.Template, field.NewPath("spec"), corev1.RestartPolicyAlways)
}

func validateJob(j *batchv1.Job) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if j.Spec.Selector != nil {
		errs = append(errs, validateSelector(j.Spec.Selector, &j.Spec.Template, p)...)
	}
	return append(errs, validateJobTemplate(&j.Spec.Template, p.Child("template"))...)
}

func validateCronJob(c *batchv1.CronJob) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if c.Spec.Schedule == "" {
		errs = append(errs, field.Required(p.Child("schedule"), ""))
	}
	return append(errs, validateJobTemplate(&c.Spec.JobTemplate.Spec.Template, p.Child("jobTemplate", "spec", "template"))...)
}

func validateJobTemplate(t *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
	errs := validatePodSpec(&t.Spec, p.Child("spec"))
	if rp := t.Spec.RestartPolicy; rp != corev1.RestartPolicyOnFailure && rp != corev1.RestartPolicyNever {
		errs = append(errs, field.NotSupported(p.Child("spec", "restartPolicy"), rp, []string{string(corev1.RestartPolicyOnFailure), string(corev1.RestartPolicyNever)}))
	}
	return errs
}

func validatePod(pod *corev1.Pod) field.ErrorList {
	return validatePodSpec(&pod.Spec, field.NewPath("spec"))
}

func validateReplicas(r *int32, p *field.Path) field.ErrorList {
	if r != nil && *r < 0 {
		return field.ErrorList{field.Invalid(p, *r, "must be greater than or equal to 0")}
	}
	return nil
}

// validateWorkload checks a controller's selector, template and restart policy.
func validateWorkload(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec, p *field.Path, restart corev1.RestartPolicy) field.ErrorList {
	var errs field.ErrorList
	if sel != nil { // a missing selector is a required field (typedSchema.Validate)
		if len(sel.MatchLabels)+len(sel.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(p.Child("selector"), sel, "empty selector is invalid"))
		}
		errs = append(errs, validateSelector(sel, t, p)...)
	}
	errs = append(errs, validatePodSpec(&t.Spec, p.Child("template", "spec"))...)
	if t.Spec.RestartPolicy != restart {
		errs = append(errs, field.NotSupported(p.Child("template", "spec", "restartPolicy"), t.Spec.RestartPolicy, []string{string(restart)}))
	}
	return errs
}

// validateSelector requires sel to be valid and to select t's labels.
func validateSelector(sel *metav1.LabelSelector, t *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return field.ErrorList{field.Invalid(p.Child("selector"), sel, err.Error())}
	}
	if !s.Empty() && !s.Matches(labels.Set(t.Labels)) {
		return field.ErrorList{field.Invalid(p.Child("template", "metadata", "labels"), t.Labels, "`selector` does not match template `labels`")}
	}
	return nil
}

func validatePodSpec(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.Containers) == 0 {
		errs = append(errs, field.Required(p.Child("containers"), ""))
	}
	names := sets.New[string]()
	for _, group := range []struct {
		name string
		cs   []corev1.Container
	}{{"initContainers", s.InitContainers}, {"containers", s.Containers}} {
		for i, c := range group.cs {
			cp := p.Child(group.name).Index(i)
			switch {
			case c.Name == "":
				errs = append(errs, field.Required(cp.Child("name"), ""))
			case names.Has(c.Name):
				errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
			default:
				for _, msg := range validation.IsDNS1123Label(c.Name) {
					errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
				}
			}
			names.Insert(c.Name)
			if c.Image == "" {
				errs = append(errs, field.Required(cp.Child("image"), ""))
			}
			for j, port := range c.Ports {
				errs = append(errs, validatePort(port.ContainerPort, cp.Child("ports").Index(j).Child("containerPort"))...)
			}
		}
	}
	return errs
}

func validatePort(port int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(port)) {
		errs = append(errs, field.Invalid(p, port, msg))
	}
	return errs
}

func validateService(svc *corev1.Service) field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	switch svc.Spec.Type {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
		if len(svc.Spec.Ports) == 0 && svc.Spec.ClusterIP != corev1.ClusterIPNone {
			errs = append(errs, field.Required(p.Child("ports"), ""))
		}
	case corev1.ServiceTypeExternalName:
		if svc.Spec.ExternalName == "" {
			errs = append(errs, field.Required(p.Child("externalName"), ""))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), svc.Spec.Type, []string{"ClusterIP", "ExternalName", "LoadBalancer", "NodePort"}))
	}
	names := sets.New[string]()
	for i, port := range svc.Spec.Ports {
		pp := p.Child("ports").Index(i)
		if len(svc.Spec.Ports) > 1 && port.Name == "" {
			errs = append(errs, field.Required(pp.Child("name"), ""))
		} else if port.Name != "" && names.Has(port.Name) {
			errs = append(errs, field.Duplicate(pp.Child("name"), port.Name))
		}
		names.Insert(port.Name)
		errs = append(errs, validatePort(port.Port, pp.Child("port"))...)
		if port.TargetPort.Type == intstr.Int {
			errs = append(errs, validatePort(port.TargetPort.IntVal, pp.Child("targetPort"))...)
		}
	}
	return errs
}

func validateConfigMap(c *corev1.ConfigMap) field.ErrorList {
	p := field.NewPath("data")
	var errs field.ErrorList
	for k := range c.Data {
		errs = append(errs, validateKey(k, p.Key(k))...)
	}
	for k := range c.BinaryData {
		if _, dup := c.Data[k]; dup {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), k, fmt.Sprintf("duplicate of key %q in data", k)))
		}
		errs = append(errs, validateKey(k, field.NewPath("binaryData").Key(k))...)
	}
	return errs
}

func validateSecret(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	for k := range s.Data {
		errs = append(errs, validateKey(k, field.NewPath("data").Key(k))...)
	}
	return errs
}

func validateKey(k string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsConfigMapKey(k) {
		errs = append(errs, field.Invalid(p, k, msg))
	}
	return errs
}

// validateNode checks a Node's taints as kube-apiserver's ValidateNode does, under the path
// it reports them at (metadata.taints, not spec.taints).
func validateNode(n *corev1.Node) field.ErrorList {
	p := field.NewPath("metadata", "taints")
	var errs field.ErrorList
	seen := map[corev1.TaintEffect]sets.Set[string]{}
	for i, t := range n.Spec.Taints {
		tp := p.Index(i)
		errs = append(errs, metav1validation.ValidateLabelName(t.Key, tp.Child("key"))...)
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			errs = append(errs, field.Invalid(tp.Child("value"), t.Value, strings.Join(msgs, ";")))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		case "":
			errs = append(errs, field.Required(tp.Child("effect"), ""))
		default:
			errs = append(errs, field.NotSupported(tp.Child("effect"), t.Effect,
				[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
		if seen[t.Effect].Has(t.Key) {
			// kube-apiserver shows its internal Taint, whose fields have no JSON names.
			dup := field.Duplicate(tp, struct {
				Key, Value, Effect string
				TimeAdded          *metav1.Time
			}{t.Key, t.Value, string(t.Effect), t.TimeAdded})
			dup.Detail = "taints must be unique by key and effect pair"
			errs = append(errs, dup)
			continue
		}
		if seen[t.Effect] == nil {
			seen[t.Effect] = sets.New[string]()
		}
		seen[t.Effect].Insert(t.Key)
	}
	return errs
}
