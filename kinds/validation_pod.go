package kinds

import (
	"fmt"
	"path"
	"path/filepath"
	"reflect"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A pod's spec and template as kube-apiserver validates them (ValidatePodSpec and
// ValidatePodTemplateSpec of k8s.io/kubernetes/pkg/apis/core/validation), in its order and
// words: volumes, containers (names, images, ports, env, mounts, resources, probes, lifecycle
// hooks), init containers, the restart and DNS policies, the node selector, pull secrets, the
// service account and node names, hostname, tolerations. Not checked: security contexts,
// affinities, topology spread, DNS config, resource claims, OS-specific rules.

const (
	fileModeErrorMsg     = "must be a number between 0 and 0777 (octal), both inclusive"
	emptyDirModeErrorMsg = "must be a number between 0 and 01777 (octal), both inclusive"
	notIntegerErrorMsg   = "must be an integer"
)

// validatePodTemplate is ValidatePodTemplateSpec.
func validatePodTemplate(t *corev1.PodTemplateSpec, p *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabels(t.Labels, p.Child("labels"))
	errs = append(errs, apivalidation.ValidateAnnotations(t.Annotations, p.Child("annotations"))...)
	errs = append(errs, validatePodSpec(&t.Spec, p.Child("spec"))...)
	if len(t.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(p.Child("spec", "ephemeralContainers"), "ephemeral containers not allowed in pod template"))
	}
	return errs
}

// validatePodSpec is ValidatePodSpec.
func validatePodSpec(s *corev1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if s.TerminationGracePeriodSeconds == nil {
		errs = append(errs, field.Required(p.Child("terminationGracePeriodSeconds"), ""))
	}
	vols, verrs := validateVolumes(s.Volumes, p.Child("volumes"))
	errs = append(errs, verrs...)
	errs = append(errs, validateContainers(s.Containers, vols, p.Child("containers"))...)
	errs = append(errs, validateInitContainers(s.InitContainers, s.Containers, vols, p.Child("initContainers"))...)
	errs = append(errs, oneOf(p.Child("restartPolicy"), s.RestartPolicy, corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever)...)
	errs = append(errs, oneOf(p.Child("dnsPolicy"), s.DNSPolicy, corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone)...)
	errs = append(errs, metav1validation.ValidateLabels(s.NodeSelector, p.Child("nodeSelector"))...)
	for i, ref := range s.ImagePullSecrets {
		if !reflect.DeepEqual(corev1.LocalObjectReference{Name: ref.Name}, ref) {
			errs = append(errs, field.Invalid(p.Child("imagePullSecrets").Index(i), ref, "only name may be set"))
		}
	}
	if s.ServiceAccountName != "" {
		errs = append(errs, nameErrors(p.Child("serviceAccountName"), s.ServiceAccountName, NameIsDNSSubdomain)...)
	}
	if s.DeprecatedServiceAccount != s.ServiceAccountName { //nolint:staticcheck // kube-apiserver holds them equal
		errs = append(errs, field.Invalid(p.Child("deprecatedServiceAccount"), s.DeprecatedServiceAccount, //nolint:staticcheck
			fmt.Sprintf("must be the same as serviceAccountName: %q", s.ServiceAccountName)))
	}
	if s.NodeName != "" {
		errs = append(errs, nameErrors(p.Child("nodeName"), s.NodeName, NameIsDNSSubdomain)...)
	}
	if d := s.ActiveDeadlineSeconds; d != nil && (*d < 1 || *d > 1<<31-1) {
		errs = append(errs, field.Invalid(p.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(1, 1<<31-1)))
	}
	if s.Hostname != "" {
		errs = append(errs, dnsLabel(s.Hostname, p.Child("hostname"))...)
	}
	if s.Subdomain != "" {
		errs = append(errs, dnsLabel(s.Subdomain, p.Child("subdomain"))...)
	}
	errs = append(errs, validateTolerations(s.Tolerations, p.Child("tolerations"))...)
	if s.PriorityClassName != "" {
		errs = append(errs, nameErrors(p.Child("priorityClassName"), s.PriorityClassName, NameIsDNSSubdomain)...)
	}
	if s.PreemptionPolicy != nil {
		errs = append(errs, oneOf(p.Child("preemptionPolicy"), *s.PreemptionPolicy, corev1.PreemptLowerPriority, corev1.PreemptNever)...)
	}
	return errs
}

// oneOf requires v to be one of allowed: a Required error when empty, NotSupported otherwise.
func oneOf[T ~string](p *field.Path, v T, allowed ...T) field.ErrorList {
	if v == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(p, v, allowed)}
}

// nameErrors reports the messages of a name rule for the name at p.
func nameErrors(p *field.Path, name string, rule func(string, bool) []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range rule(name, false) {
		errs = append(errs, field.Invalid(p, name, msg))
	}
	return errs
}

// dnsLabel is ValidateDNS1123Label.
func dnsLabel(v string, p *field.Path) field.ErrorList {
	if DNSLabelValid(v) {
		return nil
	}
	return stringErrors(p, v, validation.IsDNS1123Label(v))
}

// dnsSubdomain is ValidateDNS1123Subdomain.
func dnsSubdomain(v string, p *field.Path) field.ErrorList {
	if isDNS1123Subdomain(v) {
		return nil
	}
	return stringErrors(p, v, validation.IsDNS1123Subdomain(v))
}

// stringErrors makes one Invalid error of each message about v.
func stringErrors(p *field.Path, v string, msgs []string) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range msgs {
		errs = append(errs, field.Invalid(p, v, msg))
	}
	return errs
}

// nonNegative is ValidateNonnegativeField.
func nonNegative(v int64, p *field.Path) field.ErrorList {
	return apivalidation.ValidateNonnegativeField(v, p)
}

// validateVolumes is ValidateVolumes: it returns the volumes that passed, which mounts may
// name.
func validateVolumes(volumes []corev1.Volume, p *field.Path) (map[string]corev1.VolumeSource, field.ErrorList) {
	var errs field.ErrorList
	names := sets.New[string]()
	vols := make(map[string]corev1.VolumeSource, len(volumes))
	for i, v := range volumes {
		vp := p.Index(i)
		el := validateVolumeSource(&v.VolumeSource, vp)
		if v.Name == "" {
			el = append(el, field.Required(vp.Child("name"), ""))
		} else {
			el = append(el, dnsLabel(v.Name, vp.Child("name"))...)
		}
		if names.Has(v.Name) {
			el = append(el, field.Duplicate(vp.Child("name"), v.Name))
		}
		if len(el) == 0 {
			names.Insert(v.Name)
			vols[v.Name] = v.VolumeSource
		} else {
			errs = append(errs, el...)
		}
	}
	return vols, errs
}

// validateVolumeSource is validateVolumeSource: exactly one source, in kube-apiserver's order,
// the usual ones checked in depth.
func validateVolumeSource(s *corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	one := func(present bool, name string, check func(*field.Path) field.ErrorList) {
		if !present {
			return
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(p.Child(name), "may not specify more than 1 volume type"))
			return
		}
		n++
		if check != nil {
			errs = append(errs, check(p.Child(name))...)
		}
	}
	one(s.EmptyDir != nil, "emptyDir", func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if l := s.EmptyDir.SizeLimit; l != nil && l.Sign() < 0 {
			errs = append(errs, field.Forbidden(p.Child("sizeLimit"), "SizeLimit field must be a valid resource quantity"))
		}
		return errs
	})
	one(s.HostPath != nil, "hostPath", func(p *field.Path) field.ErrorList {
		if s.HostPath.Path == "" {
			return field.ErrorList{field.Required(p.Child("path"), "")}
		}
		errs := noBacksteps(s.HostPath.Path, p.Child("path"))
		if t := s.HostPath.Type; t != nil && !hostPathTypes.Has(*t) {
			errs = append(errs, field.NotSupported(p.Child("type"), t, sets.List(hostPathTypes)))
		}
		return errs
	})
	one(s.GitRepo != nil, "gitRepo", nil)
	one(s.GCEPersistentDisk != nil, "gcePersistentDisk", nil)
	one(s.AWSElasticBlockStore != nil, "awsElasticBlockStore", nil)
	one(s.Secret != nil, "secret", func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if s.Secret.SecretName == "" {
			errs = append(errs, field.Required(p.Child("secretName"), ""))
		}
		return append(errs, validateProjectedFiles(s.Secret.DefaultMode, s.Secret.Items, p)...)
	})
	one(s.NFS != nil, "nfs", nil)
	one(s.ISCSI != nil, "iscsi", nil)
	one(s.Glusterfs != nil, "glusterfs", nil)
	one(s.PersistentVolumeClaim != nil, "persistentVolumeClaim", func(p *field.Path) field.ErrorList {
		if s.PersistentVolumeClaim.ClaimName == "" {
			return field.ErrorList{field.Required(p.Child("claimName"), "")}
		}
		return nil
	})
	one(s.RBD != nil, "rbd", nil)
	one(s.FlexVolume != nil, "flexVolume", nil)
	one(s.Cinder != nil, "cinder", nil)
	one(s.CephFS != nil, "cephFS", nil)
	one(s.Flocker != nil, "flocker", nil)
	one(s.DownwardAPI != nil, "downwarAPI", nil) // sic: kube-apiserver's path
	one(s.FC != nil, "fc", nil)
	one(s.AzureFile != nil, "azureFile", nil)
	one(s.ConfigMap != nil, "configMap", func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if s.ConfigMap.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		return append(errs, validateProjectedFiles(s.ConfigMap.DefaultMode, s.ConfigMap.Items, p)...)
	})
	one(s.VsphereVolume != nil, "vsphereVolume", nil)
	one(s.Quobyte != nil, "quobyte", nil)
	one(s.AzureDisk != nil, "azureDisk", nil)
	one(s.PhotonPersistentDisk != nil, "photonPersistentDisk", nil)
	one(s.Projected != nil, "projected", func(p *field.Path) field.ErrorList {
		if m := s.Projected.DefaultMode; m != nil && (*m > 0o777 || *m < 0) {
			return field.ErrorList{field.Invalid(p.Child("defaultMode"), *m, fileModeErrorMsg)}
		}
		return nil
	})
	one(s.PortworxVolume != nil, "portworxVolume", nil)
	one(s.ScaleIO != nil, "scaleIO", nil)
	one(s.StorageOS != nil, "storageos", nil)
	one(s.CSI != nil, "csi", nil)
	one(s.Ephemeral != nil, "ephemeral", nil)
	one(s.Image != nil, "image", nil)
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a volume type"))
	}
	return errs
}

var hostPathTypes = sets.New(corev1.HostPathUnset, corev1.HostPathDirectoryOrCreate, corev1.HostPathDirectory,
	corev1.HostPathFileOrCreate, corev1.HostPathFile, corev1.HostPathSocket, corev1.HostPathCharDev, corev1.HostPathBlockDev)

// validateProjectedFiles checks a Secret's or ConfigMap's volume mode and items.
func validateProjectedFiles(mode *int32, items []corev1.KeyToPath, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if mode != nil && (*mode > 0o777 || *mode < 0) {
		errs = append(errs, field.Invalid(p.Child("defaultMode"), *mode, fileModeErrorMsg))
	}
	for i, kp := range items {
		ip := p.Child("items").Index(i)
		if kp.Key == "" {
			errs = append(errs, field.Required(ip.Child("key"), ""))
		}
		if kp.Path == "" {
			errs = append(errs, field.Required(ip.Child("path"), ""))
		}
		errs = append(errs, localNonReservedPath(kp.Path, ip.Child("path"))...)
		if kp.Mode != nil && (*kp.Mode > 0o777 || *kp.Mode < 0) {
			errs = append(errs, field.Invalid(ip.Child("mode"), *kp.Mode, fileModeErrorMsg))
		}
	}
	return errs
}

// localNonReservedPath is ValidateLocalNonReservedPath: relative, no "..".
func localNonReservedPath(target string, p *field.Path) field.ErrorList {
	errs := localDescendingPath(target, p)
	if strings.HasPrefix(target, "..") && !strings.HasPrefix(target, "../") {
		errs = append(errs, field.Invalid(p, target, "must not start with '..'"))
	}
	return errs
}

func localDescendingPath(target string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if path.IsAbs(target) {
		errs = append(errs, field.Invalid(p, target, "must be a relative path"))
	}
	return append(errs, noBacksteps(target, p)...)
}

func noBacksteps(target string, p *field.Path) field.ErrorList {
	for _, item := range strings.Split(filepath.ToSlash(target), "/") {
		if item == ".." {
			return field.ErrorList{field.Invalid(p, target, "must not contain '..'")}
		}
	}
	return nil
}

// validateContainers is validateContainers: the regular containers.
func validateContainers(cs []corev1.Container, vols map[string]corev1.VolumeSource, p *field.Path) field.ErrorList {
	if len(cs) == 0 {
		return field.ErrorList{field.Required(p, "")}
	}
	var errs field.ErrorList
	names := sets.New[string]()
	for i := range cs {
		c := &cs[i]
		cp := p.Index(i)
		errs = append(errs, validateContainer(c, vols, cp)...)
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		} else {
			names.Insert(c.Name)
		}
		if c.Lifecycle != nil {
			errs = append(errs, validateLifecycle(c.Lifecycle, cp.Child("lifecycle"))...)
		}
		errs = append(errs, validateProbe(c.LivenessProbe, cp.Child("livenessProbe"), true)...)
		errs = append(errs, validateProbe(c.ReadinessProbe, cp.Child("readinessProbe"), false)...)
		if c.ReadinessProbe != nil && c.ReadinessProbe.TerminationGracePeriodSeconds != nil {
			errs = append(errs, field.Invalid(cp.Child("readinessProbe", "terminationGracePeriodSeconds"), c.ReadinessProbe.TerminationGracePeriodSeconds, "must not be set for readinessProbes"))
		}
		errs = append(errs, validateProbe(c.StartupProbe, cp.Child("startupProbe"), true)...)
	}
	return append(errs, hostPortConflicts(cs, p)...)
}

// validateInitContainers is validateInitContainers: names unique across both lists; probes
// and lifecycle hooks only for restartable (sidecar) init containers.
func validateInitContainers(cs, regular []corev1.Container, vols map[string]corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for _, c := range regular {
		names.Insert(c.Name)
	}
	for i := range cs {
		c := &cs[i]
		cp := p.Index(i)
		errs = append(errs, validateContainer(c, vols, cp)...)
		always := false
		if rp := c.RestartPolicy; rp != nil {
			if *rp == corev1.ContainerRestartPolicyAlways {
				always = true
			} else {
				errs = append(errs, field.NotSupported(cp.Child("restartPolicy"), *rp, []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}))
			}
		}
		if names.Has(c.Name) {
			errs = append(errs, field.Duplicate(cp.Child("name"), c.Name))
		} else if c.Name != "" {
			names.Insert(c.Name)
		}
		errs = append(errs, hostPortConflicts(cs[i:i+1], p)...)
		if always {
			if c.Lifecycle != nil {
				errs = append(errs, validateLifecycle(c.Lifecycle, cp.Child("lifecycle"))...)
			}
			errs = append(errs, validateProbe(c.LivenessProbe, cp.Child("livenessProbe"), true)...)
			errs = append(errs, validateProbe(c.ReadinessProbe, cp.Child("readinessProbe"), false)...)
			errs = append(errs, validateProbe(c.StartupProbe, cp.Child("startupProbe"), true)...)
			continue
		}
		const notSidecar = "may not be set for init containers without restartPolicy=Always"
		if c.Lifecycle != nil {
			errs = append(errs, field.Forbidden(cp.Child("lifecycle"), notSidecar))
		}
		if c.LivenessProbe != nil {
			errs = append(errs, field.Forbidden(cp.Child("livenessProbe"), notSidecar))
		}
		if c.ReadinessProbe != nil {
			errs = append(errs, field.Forbidden(cp.Child("readinessProbe"), notSidecar))
		}
		if c.StartupProbe != nil {
			errs = append(errs, field.Forbidden(cp.Child("startupProbe"), notSidecar))
		}
	}
	return errs
}

// validateContainer is validateContainerCommon.
func validateContainer(c *corev1.Container, vols map[string]corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, dnsLabel(c.Name, p.Child("name"))...)
	}
	if c.Image == "" {
		errs = append(errs, field.Required(p.Child("image"), ""))
	}
	errs = append(errs, oneOf(p.Child("terminationMessagePolicy"), c.TerminationMessagePolicy, corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError)...)
	errs = append(errs, validateContainerPorts(c.Ports, p.Child("ports"))...)
	errs = append(errs, validateEnv(c.Env, p.Child("env"))...)
	errs = append(errs, validateEnvFrom(c.EnvFrom, p.Child("envFrom"))...)
	errs = append(errs, validateVolumeMounts(c.VolumeMounts, vols, p.Child("volumeMounts"))...)
	if c.ImagePullPolicy == "" {
		errs = append(errs, field.Required(p.Child("imagePullPolicy"), ""))
	} else if !pullPolicies.Has(c.ImagePullPolicy) {
		errs = append(errs, field.NotSupported(p.Child("imagePullPolicy"), c.ImagePullPolicy, sets.List(pullPolicies)))
	}
	return append(errs, validateResources(&c.Resources, p.Child("resources"))...)
}

var pullPolicies = sets.New(corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever)

var portProtocols = sets.New(corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP)

// validateContainerPorts is validateContainerPorts.
func validateContainerPorts(ports []corev1.ContainerPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, port := range ports {
		ip := p.Index(i)
		if port.Name != "" {
			if msgs := validation.IsValidPortName(port.Name); len(msgs) != 0 {
				errs = append(errs, stringErrors(ip.Child("name"), port.Name, msgs)...)
			} else if names.Has(port.Name) {
				errs = append(errs, field.Duplicate(ip.Child("name"), port.Name))
			} else {
				names.Insert(port.Name)
			}
		}
		if port.ContainerPort == 0 {
			errs = append(errs, field.Required(ip.Child("containerPort"), ""))
		} else {
			errs = append(errs, validatePort(port.ContainerPort, ip.Child("containerPort"))...)
		}
		if port.HostPort != 0 {
			errs = append(errs, validatePort(port.HostPort, ip.Child("hostPort"))...)
		}
		if port.Protocol == "" {
			errs = append(errs, field.Required(ip.Child("protocol"), ""))
		} else if !portProtocols.Has(port.Protocol) {
			errs = append(errs, field.NotSupported(ip.Child("protocol"), port.Protocol, sets.List(portProtocols)))
		}
	}
	return errs
}

// hostPortConflicts is checkHostPortConflicts.
func hostPortConflicts(cs []corev1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for ci, c := range cs {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(p.Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
			}
			seen.Insert(key)
		}
	}
	return errs
}

var envFieldPaths = sets.New("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName",
	"spec.serviceAccountName", "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")

var envResourcePaths = sets.New("limits.cpu", "limits.memory", "limits.ephemeral-storage",
	"requests.cpu", "requests.memory", "requests.ephemeral-storage")

// validateEnv is ValidateEnv (with relaxed names: any printable ASCII but '=', as kube-apiserver
// accepts them since v1.34).
func validateEnv(vars []corev1.EnvVar, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		ip := p.Index(i)
		if ev.Name == "" {
			errs = append(errs, field.Required(ip.Child("name"), ""))
		} else {
			errs = append(errs, stringErrors(ip.Child("name"), ev.Name, validation.IsRelaxedEnvVarName(ev.Name))...)
		}
		errs = append(errs, validateEnvValueFrom(ev, ip.Child("valueFrom"))...)
	}
	return errs
}

func validateEnvValueFrom(ev corev1.EnvVar, p *field.Path) field.ErrorList {
	from := ev.ValueFrom
	if from == nil {
		return nil
	}
	var errs field.ErrorList
	n := 0
	if fr := from.FieldRef; fr != nil {
		n++
		switch {
		case fr.APIVersion == "":
			errs = append(errs, field.Required(p.Child("fieldRef", "apiVersion"), ""))
		case fr.FieldPath == "":
			errs = append(errs, field.Required(p.Child("fieldRef", "fieldPath"), ""))
		default:
			errs = append(errs, validateEnvFieldPath(fr.APIVersion, fr.FieldPath, p.Child("fieldRef"))...)
		}
	}
	if rf := from.ResourceFieldRef; rf != nil {
		n++
		rp := p.Child("resourceFieldRef")
		switch {
		case rf.Resource == "":
			errs = append(errs, field.Required(rp.Child("resource"), ""))
		case !envResourcePaths.Has(rf.Resource) && !strings.HasPrefix(rf.Resource, "requests.hugepages-") && !strings.HasPrefix(rf.Resource, "limits.hugepages-"):
			errs = append(errs, field.NotSupported(rp.Child("resource"), rf.Resource, sets.List(envResourcePaths)))
		}
	}
	if r := from.ConfigMapKeyRef; r != nil {
		n++
		errs = append(errs, validateKeyRef(r.Name, r.Key, p.Child("configMapKeyRef"))...)
	}
	if r := from.SecretKeyRef; r != nil {
		n++
		errs = append(errs, validateKeyRef(r.Name, r.Key, p.Child("secretKeyRef"))...)
	}
	if from.FileKeyRef != nil {
		n++
	}
	switch {
	case n == 0:
		errs = append(errs, field.Invalid(p, "", "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef`, `secretKeyRef` or `fileKeyRef`"))
	case ev.Value != "":
		errs = append(errs, field.Invalid(p, "", "may not be specified when `value` is not empty"))
	case n > 1:
		errs = append(errs, field.Invalid(p, "", "may not have more than one field specified at a time"))
	}
	return errs
}

// validateEnvFieldPath checks the downward API path of an env var's fieldRef as
// validateObjectFieldSelector does: converted from the v1 path first
// (ConvertDownwardAPIFieldLabel), then among the paths env vars may read.
func validateEnvFieldPath(apiVersion, fp string, p *field.Path) field.ErrorList {
	path, err := convertFieldLabel(apiVersion, fp)
	if err != nil {
		return field.ErrorList{field.Invalid(p.Child("fieldPath"), fp, "error converting fieldPath: "+err.Error())}
	}
	if base, sub, ok := splitSubscript(path); ok {
		switch base {
		case "metadata.annotations":
			return stringErrors(p, strings.ToLower(sub), validation.IsQualifiedName(strings.ToLower(sub)))
		case "metadata.labels":
			return stringErrors(p, sub, validation.IsQualifiedName(sub))
		}
		return field.ErrorList{field.Invalid(p, base, "does not support subscript")}
	}
	if !envFieldPaths.Has(path) {
		return field.ErrorList{field.NotSupported(p.Child("fieldPath"), path, sets.List(envFieldPaths))}
	}
	return nil
}

// podFieldLabels are the v1 Pod paths the downward API converts.
var podFieldLabels = sets.New("metadata.annotations", "metadata.labels", "metadata.name", "metadata.namespace", "metadata.uid",
	"spec.nodeName", "spec.restartPolicy", "spec.serviceAccountName", "spec.schedulerName", "status.phase",
	"status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")

// convertFieldLabel is ConvertDownwardAPIFieldLabel.
func convertFieldLabel(version, label string) (string, error) {
	if version != "v1" {
		return "", fmt.Errorf("unsupported pod version: %s", version)
	}
	if base, _, ok := splitSubscript(label); ok {
		if base == "metadata.annotations" || base == "metadata.labels" {
			return label, nil
		}
		return "", fmt.Errorf("field label does not support subscript: %s", label)
	}
	switch {
	case podFieldLabels.Has(label):
		return label, nil
	case label == "spec.host":
		return "spec.nodeName", nil
	}
	return "", fmt.Errorf("field label not supported: %s", label)
}

// splitSubscript splits "metadata.labels['k']" into its path and key (SplitMaybeSubscriptedPath).
func splitSubscript(fp string) (path, sub string, ok bool) {
	if !strings.HasSuffix(fp, "']") {
		return "", "", false
	}
	path, sub, found := strings.Cut(strings.TrimSuffix(fp, "']"), "['")
	if !found || path == "" {
		return "", "", false
	}
	return path, sub, true
}

// validateKeyRef checks a configMapKeyRef or secretKeyRef.
func validateKeyRef(name, key string, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else {
		errs = append(errs, nameErrors(p.Child("name"), name, NameIsDNSSubdomain)...)
	}
	if key == "" {
		errs = append(errs, field.Required(p.Child("key"), ""))
	} else {
		errs = append(errs, stringErrors(p.Child("key"), key, validation.IsConfigMapKey(key))...)
	}
	return errs
}

// validateEnvFrom is ValidateEnvFrom.
func validateEnvFrom(vars []corev1.EnvFromSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, ev := range vars {
		ip := p.Index(i)
		if ev.Prefix != "" {
			errs = append(errs, stringErrors(ip.Child("prefix"), ev.Prefix, validation.IsRelaxedEnvVarName(ev.Prefix))...)
		}
		n := 0
		if r := ev.ConfigMapRef; r != nil {
			n++
			errs = append(errs, validateEnvSourceName(r.Name, ip.Child("configMapRef"))...)
		}
		if r := ev.SecretRef; r != nil {
			n++
			errs = append(errs, validateEnvSourceName(r.Name, ip.Child("secretRef"))...)
		}
		if n == 0 {
			errs = append(errs, field.Invalid(p, "", "must specify one of: `configMapRef` or `secretRef`"))
		} else if n > 1 {
			errs = append(errs, field.Invalid(p, "", "may not have more than one field specified at a time"))
		}
	}
	return errs
}

func validateEnvSourceName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p.Child("name"), "")}
	}
	var errs field.ErrorList
	for _, msg := range NameIsDNSSubdomain(name, true) {
		errs = append(errs, field.Invalid(p.Child("name"), name, msg))
	}
	return errs
}

// validateVolumeMounts is ValidateVolumeMounts.
func validateVolumeMounts(mounts []corev1.VolumeMount, vols map[string]corev1.VolumeSource, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	points := sets.New[string]()
	for i, m := range mounts {
		ip := p.Index(i)
		if m.Name == "" {
			errs = append(errs, field.Required(ip.Child("name"), ""))
		}
		if _, ok := vols[m.Name]; !ok {
			errs = append(errs, field.NotFound(ip.Child("name"), m.Name))
		}
		if m.MountPath == "" {
			errs = append(errs, field.Required(ip.Child("mountPath"), ""))
		}
		if points.Has(m.MountPath) {
			errs = append(errs, field.Invalid(ip.Child("mountPath"), m.MountPath, "must be unique"))
		}
		points.Insert(m.MountPath)
		if m.SubPath != "" {
			errs = append(errs, localDescendingPath(m.SubPath, p.Child("subPath"))...)
		}
		if m.SubPathExpr != "" {
			if m.SubPath != "" {
				errs = append(errs, field.Invalid(ip.Child("subPathExpr"), m.SubPathExpr, "subPathExpr and subPath are mutually exclusive"))
			}
			errs = append(errs, localDescendingPath(m.SubPathExpr, p.Child("subPathExpr"))...)
		}
	}
	return errs
}

var containerResources = sets.New(corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage)

// standardResources are the resource names without a domain (helper.IsStandardResourceName).
var standardResources = sets.New(corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage,
	corev1.ResourceRequestsCPU, corev1.ResourceRequestsMemory, corev1.ResourceRequestsEphemeralStorage,
	corev1.ResourceLimitsCPU, corev1.ResourceLimitsMemory, corev1.ResourceLimitsEphemeralStorage,
	corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices, corev1.ResourceReplicationControllers,
	corev1.ResourceSecrets, corev1.ResourcePersistentVolumeClaims, corev1.ResourceConfigMaps,
	corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers, corev1.ResourceStorage,
	corev1.ResourceRequestsStorage)

var integerResources = sets.New(corev1.ResourcePods, corev1.ResourceQuotas, corev1.ResourceServices,
	corev1.ResourceReplicationControllers, corev1.ResourceSecrets, corev1.ResourceConfigMaps,
	corev1.ResourcePersistentVolumeClaims, corev1.ResourceServicesNodePorts, corev1.ResourceServicesLoadBalancers)

// validateResources is ValidateContainerResourceRequirements: names, quantities, and requests
// no more than limits (equal for resources that cannot be overcommitted).
func validateResources(r *corev1.ResourceRequirements, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	limPath, reqPath := p.Child("limits"), p.Child("requests")
	for _, name := range sortedResourceNames(r.Limits) {
		q := r.Limits[name]
		fp := limPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, fp)...)
		errs = append(errs, validateQuantity(name, q, fp)...)
	}
	for _, name := range sortedResourceNames(r.Requests) {
		q := r.Requests[name]
		fp := reqPath.Key(string(name))
		errs = append(errs, validateContainerResourceName(name, fp)...)
		errs = append(errs, validateQuantity(name, q, fp)...)
		if lim, ok := r.Limits[name]; ok {
			if q.Cmp(lim) != 0 && !overcommitAllowed(name) {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be equal to %s limit of %s", name, lim.String())))
			} else if q.Cmp(lim) > 0 {
				errs = append(errs, field.Invalid(reqPath, q.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, lim.String())))
			}
		} else if !overcommitAllowed(name) {
			errs = append(errs, field.Required(limPath, "Limit must be set for non overcommitable resources"))
		}
	}
	return errs
}

// sortedResourceNames orders a resource list's names, so the causes come in the same order
// every time (kube-apiserver walks its map in Go's random order).
func sortedResourceNames(l corev1.ResourceList) []corev1.ResourceName {
	names := make([]corev1.ResourceName, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	return sets.List(sets.New(names...))
}

func validateQuantity(name corev1.ResourceName, q resource.Quantity, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if q.Sign() < 0 {
		errs = append(errs, field.Invalid(p, q.String(), apivalidation.IsNegativeErrorMsg))
	}
	if (integerResources.Has(name) || extendedResource(name)) && q.MilliValue()%1000 != 0 {
		errs = append(errs, field.Invalid(p, q, notIntegerErrorMsg))
	}
	return errs
}

// validateContainerResourceName is ValidateContainerResourceName.
func validateContainerResourceName(name corev1.ResourceName, p *field.Path) field.ErrorList {
	if msgs := validation.IsQualifiedName(string(name)); len(msgs) > 0 {
		return stringErrors(p, string(name), msgs)
	}
	if !strings.Contains(string(name), "/") {
		var errs field.ErrorList
		if !standardResources.Has(name) && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) && !strings.HasPrefix(string(name), "requests."+corev1.ResourceHugePagesPrefix) {
			errs = append(errs, field.Invalid(p, name, "must be a standard resource type or fully qualified"))
		}
		if !containerResources.Has(name) && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			return append(errs, field.Invalid(p, name, "must be a standard resource for containers"))
		}
	} else if !nativeResource(name) && !extendedResource(name) {
		return field.ErrorList{field.Invalid(p, name, "doesn't follow extended resource name standard")}
	}
	return nil
}

func nativeResource(name corev1.ResourceName) bool {
	return !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
}

func extendedResource(name corev1.ResourceName) bool {
	if nativeResource(name) || strings.HasPrefix(string(name), corev1.DefaultResourceRequestsPrefix) {
		return false
	}
	return len(validation.IsQualifiedName(corev1.DefaultResourceRequestsPrefix+string(name))) == 0
}

func overcommitAllowed(name corev1.ResourceName) bool {
	return nativeResource(name) && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

// validateProbe is validateProbe, with the liveness and startup probes' successThreshold of 1.
func validateProbe(pr *corev1.Probe, p *field.Path, once bool) field.ErrorList {
	if pr == nil {
		return nil
	}
	errs := validateHandler(pr.Exec, pr.HTTPGet, pr.TCPSocket, pr.GRPC, nil, p)
	errs = append(errs, nonNegative(int64(pr.InitialDelaySeconds), p.Child("initialDelaySeconds"))...)
	errs = append(errs, nonNegative(int64(pr.TimeoutSeconds), p.Child("timeoutSeconds"))...)
	errs = append(errs, nonNegative(int64(pr.PeriodSeconds), p.Child("periodSeconds"))...)
	errs = append(errs, nonNegative(int64(pr.SuccessThreshold), p.Child("successThreshold"))...)
	errs = append(errs, nonNegative(int64(pr.FailureThreshold), p.Child("failureThreshold"))...)
	if g := pr.TerminationGracePeriodSeconds; g != nil && *g <= 0 {
		errs = append(errs, field.Invalid(p.Child("terminationGracePeriodSeconds"), *g, "must be greater than 0"))
	}
	if once && pr.SuccessThreshold != 1 {
		errs = append(errs, field.Invalid(p.Child("successThreshold"), pr.SuccessThreshold, "must be 1"))
	}
	return errs
}

func validateLifecycle(l *corev1.Lifecycle, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, h := range []struct {
		name string
		h    *corev1.LifecycleHandler
	}{{"postStart", l.PostStart}, {"preStop", l.PreStop}} {
		if h.h != nil {
			errs = append(errs, validateHandler(h.h.Exec, h.h.HTTPGet, h.h.TCPSocket, nil, h.h.Sleep, p.Child(h.name))...)
		}
	}
	return errs
}

// validateHandler is validateHandler: exactly one action.
func validateHandler(exec *corev1.ExecAction, get *corev1.HTTPGetAction, tcp *corev1.TCPSocketAction, grpc *corev1.GRPCAction, sleep *corev1.SleepAction, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	one := func(present bool, name string, check func(*field.Path) field.ErrorList) {
		if !present {
			return
		}
		if n > 0 {
			errs = append(errs, field.Forbidden(p.Child(name), "may not specify more than 1 handler type"))
			return
		}
		n++
		errs = append(errs, check(p.Child(name))...)
	}
	one(exec != nil, "exec", func(p *field.Path) field.ErrorList {
		if len(exec.Command) == 0 {
			return field.ErrorList{field.Required(p.Child("command"), "")}
		}
		return nil
	})
	one(get != nil, "httpGet", func(p *field.Path) field.ErrorList {
		var errs field.ErrorList
		if get.Path == "" {
			errs = append(errs, field.Required(p.Child("path"), ""))
		}
		errs = append(errs, portNumOrName(get.Port, p.Child("port"))...)
		if get.Scheme != corev1.URISchemeHTTP && get.Scheme != corev1.URISchemeHTTPS {
			errs = append(errs, field.NotSupported(p.Child("scheme"), get.Scheme, []corev1.URIScheme{corev1.URISchemeHTTP, corev1.URISchemeHTTPS}))
		}
		for _, h := range get.HTTPHeaders {
			errs = append(errs, stringErrors(p.Child("httpHeaders"), h.Name, validation.IsHTTPHeaderName(h.Name))...)
		}
		return errs
	})
	one(tcp != nil, "tcpSocket", func(p *field.Path) field.ErrorList { return portNumOrName(tcp.Port, p.Child("port")) })
	one(grpc != nil, "grpc", func(p *field.Path) field.ErrorList {
		return portNumOrName(intstr.FromInt32(grpc.Port), p.Child("port"))
	})
	one(sleep != nil, "sleep", func(*field.Path) field.ErrorList { return nil })
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a handler type"))
	}
	return errs
}

// portNumOrName is ValidatePortNumOrName.
func portNumOrName(port intstr.IntOrString, p *field.Path) field.ErrorList {
	if port.Type == intstr.String {
		return stringErrors(p, port.StrVal, validation.IsValidPortName(port.StrVal))
	}
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(port.IntValue()) {
		errs = append(errs, field.Invalid(p, port.IntValue(), msg))
	}
	return errs
}

// validateTolerations is ValidateTolerations.
func validateTolerations(ts []corev1.Toleration, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, t := range ts {
		ip := p.Index(i)
		if t.Key != "" {
			errs = append(errs, metav1validation.ValidateLabelName(t.Key, ip.Child("key"))...)
		}
		if t.Key == "" && t.Operator != corev1.TolerationOpExists {
			errs = append(errs, field.Invalid(ip.Child("operator"), t.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		if t.TolerationSeconds != nil && t.Effect != corev1.TaintEffectNoExecute {
			errs = append(errs, field.Invalid(ip.Child("effect"), t.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
		switch t.Operator {
		case corev1.TolerationOpEqual, "":
			if msgs := validation.IsValidLabelValue(t.Value); len(msgs) != 0 {
				errs = append(errs, field.Invalid(ip.Child("operator"), t.Value, strings.Join(msgs, ";")))
			}
		case corev1.TolerationOpExists:
			if t.Value != "" {
				errs = append(errs, field.Invalid(ip.Child("operator"), t.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			errs = append(errs, field.NotSupported(ip.Child("operator"), t.Operator, []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}))
		}
		if t.Effect != "" {
			errs = append(errs, oneOf(ip.Child("effect"), t.Effect, corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute)...)
		}
	}
	return errs
}
