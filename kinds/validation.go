package kinds

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The validation of the built-in kinds of SPEC §14, as kube-apiserver's
// (k8s.io/kubernetes/pkg/apis/*/validation, which opemu does not import: see
// DEPENDENCIES.md), rule by rule in its words: the core kinds here, pods and pod templates in
// validation_pod.go, the workloads in validation_apps.go, the other groups in
// validation_groups.go. Types and required pointers are checked for every typed kind
// (typedSchema.Validate); rules on changes (immutable fields) run on updates
// (typedSchema.ValidateUpdate). Each rule is held to kube-apiserver by a conformance case
// recorded from it (test/conformance/cases); what is left unchecked is listed in the README's
// differences.

func validateConfigMap(c *corev1.ConfigMap) field.ErrorList {
	var errs field.ErrorList
	size := 0
	for _, k := range sortedKeys(c.Data) {
		p := field.NewPath("data").Key(k)
		errs = append(errs, stringErrors(p, k, validation.IsConfigMapKey(k))...)
		if _, dup := c.BinaryData[k]; dup {
			errs = append(errs, field.Invalid(p, k, "duplicate of key present in binaryData"))
		}
		size += len(c.Data[k])
	}
	for _, k := range sortedKeys(c.BinaryData) {
		errs = append(errs, stringErrors(field.NewPath("binaryData").Key(k), k, validation.IsConfigMapKey(k))...)
		size += len(c.BinaryData[k])
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(field.NewPath(""), "", corev1.MaxSecretSize))
	}
	return errs
}

// validateConfigMapUpdate: an immutable ConfigMap keeps its data and stays immutable.
func validateConfigMapUpdate(c, old *corev1.ConfigMap) field.ErrorList {
	if !ptrOr(old.Immutable) {
		return nil
	}
	var errs field.ErrorList
	if !ptrOr(c.Immutable) {
		errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
	}
	if !reflect.DeepEqual(c.Data, old.Data) {
		errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
	}
	if !reflect.DeepEqual(c.BinaryData, old.BinaryData) {
		errs = append(errs, field.Forbidden(field.NewPath("binaryData"), "field is immutable when `immutable` is set"))
	}
	return errs
}

func validateSecret(s *corev1.Secret) field.ErrorList {
	var errs field.ErrorList
	data := field.NewPath("data")
	size := 0
	for _, k := range sortedKeys(s.Data) {
		errs = append(errs, stringErrors(data.Key(k), k, validation.IsConfigMapKey(k))...)
		size += len(s.Data[k])
	}
	if size > corev1.MaxSecretSize {
		errs = append(errs, field.TooLong(data, "", corev1.MaxSecretSize))
	}
	required := func(keys ...string) {
		for _, k := range keys {
			if _, ok := s.Data[k]; !ok {
				errs = append(errs, field.Required(data.Key(k), ""))
			}
		}
	}
	jsonKey := func(k string) {
		b, ok := s.Data[k]
		if !ok {
			errs = append(errs, field.Required(data.Key(k), ""))
			return
		}
		if err := json.Unmarshal(b, &map[string]any{}); err != nil {
			errs = append(errs, field.Invalid(data.Key(k), "<secret contents redacted>", err.Error()))
		}
	}
	switch s.Type {
	case corev1.SecretTypeServiceAccountToken:
		if s.Annotations[corev1.ServiceAccountNameKey] == "" {
			errs = append(errs, field.Required(field.NewPath("metadata", "annotations").Key(corev1.ServiceAccountNameKey), ""))
		}
	case corev1.SecretTypeDockercfg:
		jsonKey(corev1.DockerConfigKey)
	case corev1.SecretTypeDockerConfigJson:
		jsonKey(corev1.DockerConfigJsonKey)
	case corev1.SecretTypeBasicAuth:
		_, user := s.Data[corev1.BasicAuthUsernameKey]
		_, password := s.Data[corev1.BasicAuthPasswordKey]
		if !user && !password {
			required(corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey)
		}
	case corev1.SecretTypeSSHAuth:
		if len(s.Data[corev1.SSHAuthPrivateKey]) == 0 {
			errs = append(errs, field.Required(data.Key(corev1.SSHAuthPrivateKey), ""))
		}
	case corev1.SecretTypeTLS:
		required(corev1.TLSCertKey, corev1.TLSPrivateKeyKey)
	}
	return errs
}

// validateSecretUpdate: a Secret's type does not change; an immutable one keeps its data.
func validateSecretUpdate(s, old *corev1.Secret) field.ErrorList {
	errs := immutable(s.Type, old.Type, field.NewPath("type"))
	if ptrOr(old.Immutable) {
		if !ptrOr(s.Immutable) {
			errs = append(errs, field.Forbidden(field.NewPath("immutable"), "field is immutable when `immutable` is set"))
		}
		if !reflect.DeepEqual(s.Data, old.Data) {
			errs = append(errs, field.Forbidden(field.NewPath("data"), "field is immutable when `immutable` is set"))
		}
	}
	return errs
}

// secretWarnings is the Secret strategy's: a TLS Secret whose key does not match its
// certificate is accepted with a warning.
func secretWarnings(s *corev1.Secret) []string {
	if s.Type != corev1.SecretTypeTLS {
		return nil
	}
	if _, err := tls.X509KeyPair(s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]); err != nil {
		return []string{err.Error()}
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

var (
	serviceTypes     = sets.New(corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeExternalName)
	sessionAffinity  = sets.New(corev1.ServiceAffinityClientIP, corev1.ServiceAffinityNone)
	ipFamilies       = sets.New(corev1.IPv4Protocol, corev1.IPv6Protocol)
	ipFamilyPolicies = sets.New(corev1.IPFamilyPolicySingleStack, corev1.IPFamilyPolicyPreferDualStack, corev1.IPFamilyPolicyRequireDualStack)
	trafficPolicies  = []corev1.ServiceExternalTrafficPolicy{corev1.ServiceExternalTrafficPolicyCluster, corev1.ServiceExternalTrafficPolicyLocal}
)

func headless(s *corev1.Service) bool { return s.Spec.ClusterIP == corev1.ClusterIPNone }

// validateService is validateService: ports, type, selector, session affinity, cluster IPs and
// IP families, external IPs, traffic policies.
func validateService(svc *corev1.Service) field.ErrorList {
	s := &svc.Spec
	var errs field.ErrorList
	if len(s.Ports) == 0 && !headless(svc) && s.Type != corev1.ServiceTypeExternalName {
		errs = append(errs, field.Required(specPath.Child("ports"), ""))
	}
	switch s.Type {
	case corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeNodePort:
		if headless(svc) && len(s.ClusterIPs) > 0 {
			errs = append(errs, field.Invalid(specPath.Child("clusterIPs").Index(0), s.ClusterIPs[0], fmt.Sprintf("may not be set to 'None' for %s services", s.Type)))
		}
	case corev1.ServiceTypeExternalName:
		if len(s.ClusterIPs) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("clusterIPs"), "may not be set for ExternalName services"))
		}
		if len(s.IPFamilies) > 0 {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilies"), "may not be set for ExternalName services"))
		}
		if s.IPFamilyPolicy != nil {
			errs = append(errs, field.Forbidden(specPath.Child("ipFamilyPolicy"), "may not be set for ExternalName services"))
		}
		if cname := strings.TrimSuffix(s.ExternalName, "."); cname != "" {
			errs = append(errs, dnsSubdomain(cname, specPath.Child("externalName"))...)
		} else {
			errs = append(errs, field.Required(specPath.Child("externalName"), ""))
		}
	}
	names := sets.New[string]()
	for i := range s.Ports {
		errs = append(errs, validateServicePort(&s.Ports[i], len(s.Ports) > 1, names, specPath.Child("ports").Index(i))...)
	}
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabels(s.Selector, specPath.Child("selector"))...)
	}
	if s.SessionAffinity == "" {
		errs = append(errs, field.Required(specPath.Child("sessionAffinity"), ""))
	} else if !sessionAffinity.Has(s.SessionAffinity) {
		errs = append(errs, field.NotSupported(specPath.Child("sessionAffinity"), s.SessionAffinity, sets.List(sessionAffinity)))
	}
	if s.SessionAffinity == corev1.ServiceAffinityNone && s.SessionAffinityConfig != nil {
		errs = append(errs, field.Forbidden(specPath.Child("sessionAffinityConfig"), "must not be set when session affinity is None"))
	}
	errs = append(errs, validateClusterIPs(svc)...)
	for i, ip := range s.ExternalIPs {
		p := specPath.Child("externalIPs").Index(i)
		if e := validation.IsValidIPForLegacyField(p, ip, true, nil); len(e) > 0 {
			errs = append(errs, e...)
		} else {
			errs = append(errs, endpointIP(ip, p)...)
		}
	}
	if s.Type == "" {
		errs = append(errs, field.Required(specPath.Child("type"), ""))
	} else if !serviceTypes.Has(s.Type) {
		errs = append(errs, field.NotSupported(specPath.Child("type"), s.Type, sets.List(serviceTypes)))
	}
	nodePorts := map[string]bool{}
	ports := map[string]bool{}
	for i, port := range s.Ports {
		pp := specPath.Child("ports").Index(i)
		if s.Type == corev1.ServiceTypeClusterIP && port.NodePort != 0 {
			errs = append(errs, field.Forbidden(pp.Child("nodePort"), "may not be used when `type` is 'ClusterIP'"))
		}
		if port.NodePort != 0 {
			key := fmt.Sprintf("%s/%d", port.Protocol, port.NodePort)
			if nodePorts[key] {
				errs = append(errs, field.Duplicate(pp.Child("nodePort"), port.NodePort))
			}
			nodePorts[key] = true
		}
		key := fmt.Sprintf("%s/%d", port.Protocol, port.Port)
		if ports[key] {
			errs = append(errs, field.Duplicate(pp, internal(corev1.ServicePort{Protocol: port.Protocol, Port: port.Port})))
		}
		ports[key] = true
	}
	if s.AllocateLoadBalancerNodePorts != nil && s.Type != corev1.ServiceTypeLoadBalancer {
		errs = append(errs, field.Forbidden(specPath.Child("allocateLoadBalancerNodePorts"), "may only be used when `type` is 'LoadBalancer'"))
	}
	external := s.Type == corev1.ServiceTypeNodePort || s.Type == corev1.ServiceTypeLoadBalancer || len(s.ExternalIPs) > 0
	switch {
	case !external && s.ExternalTrafficPolicy != "":
		errs = append(errs, field.Invalid(specPath.Child("externalTrafficPolicy"), s.ExternalTrafficPolicy, "may only be set for externally-accessible services"))
	case external && s.ExternalTrafficPolicy == "":
		errs = append(errs, field.Required(specPath.Child("externalTrafficPolicy"), ""))
	case external && !slices.Contains(trafficPolicies, s.ExternalTrafficPolicy):
		errs = append(errs, field.NotSupported(specPath.Child("externalTrafficPolicy"), s.ExternalTrafficPolicy, trafficPolicies))
	}
	return errs
}

func validateServicePort(sp *corev1.ServicePort, requireName bool, names sets.Set[string], p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if requireName && sp.Name == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	} else if sp.Name != "" {
		errs = append(errs, dnsLabel(sp.Name, p.Child("name"))...)
		if names.Has(sp.Name) {
			errs = append(errs, field.Duplicate(p.Child("name"), sp.Name))
		} else {
			names.Insert(sp.Name)
		}
	}
	errs = append(errs, validatePort(sp.Port, p.Child("port"))...)
	if sp.Protocol == "" {
		errs = append(errs, field.Required(p.Child("protocol"), ""))
	} else if !portProtocols.Has(sp.Protocol) {
		errs = append(errs, field.NotSupported(p.Child("protocol"), sp.Protocol, sets.List(portProtocols)))
	}
	errs = append(errs, portNumOrName(sp.TargetPort, p.Child("targetPort"))...)
	if sp.AppProtocol != nil {
		errs = append(errs, stringErrors(p.Child("appProtocol"), *sp.AppProtocol, validation.IsQualifiedName(*sp.AppProtocol))...)
	}
	return errs
}

// validateClusterIPs is ValidateServiceClusterIPsRelatedFields.
func validateClusterIPs(svc *corev1.Service) field.ErrorList {
	s := &svc.Spec
	if s.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	var errs field.ErrorList
	ipsPath := specPath.Child("clusterIPs")
	if s.ClusterIP != "" {
		if len(s.ClusterIPs) == 0 {
			errs = append(errs, field.Required(ipsPath, ""))
		} else if s.ClusterIPs[0] != s.ClusterIP {
			errs = append(errs, field.Invalid(ipsPath, s.ClusterIPs, "first value must match `clusterIP`"))
		}
	} else if len(s.ClusterIPs) != 0 {
		errs = append(errs, field.Invalid(ipsPath, s.ClusterIPs, "must be empty when `clusterIP` is not specified"))
	}
	seen := sets.New[corev1.IPFamily]()
	for i, f := range s.IPFamilies {
		if !ipFamilies.Has(f) {
			errs = append(errs, field.NotSupported(specPath.Child("ipFamilies").Index(i), f, sets.List(ipFamilies)))
		}
		if seen.Has(f) {
			errs = append(errs, field.Duplicate(specPath.Child("ipFamilies").Index(i), f))
		}
		seen.Insert(f)
	}
	if pol := s.IPFamilyPolicy; pol != nil && !ipFamilyPolicies.Has(*pol) {
		errs = append(errs, field.NotSupported(specPath.Child("ipFamilyPolicy"), pol, sets.List(ipFamilyPolicies)))
	}
	invalid := false
	for i, ip := range s.ClusterIPs {
		if i == 0 && ip == corev1.ClusterIPNone {
			if len(s.ClusterIPs) > 1 {
				invalid = true
				errs = append(errs, field.Invalid(ipsPath, s.ClusterIPs, "'None' must be the first and only value"))
			}
			continue
		}
		e := validation.IsValidIPForLegacyField(ipsPath.Index(i), ip, true, nil)
		invalid = invalid || len(e) > 0
		errs = append(errs, e...)
	}
	if len(s.ClusterIPs) > 2 {
		errs = append(errs, field.Invalid(ipsPath, s.ClusterIPs, "may only hold up to 2 values"))
	}
	if invalid {
		return errs
	}
	if !headless(svc) {
		for i, ip := range s.ClusterIPs {
			if i >= len(s.IPFamilies) {
				break
			}
			v6 := strings.Contains(ip, ":")
			if s.IPFamilies[i] == corev1.IPv4Protocol && v6 {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv4 value as indicated by `ipFamilies[%v]`", i)))
			}
			if s.IPFamilies[i] == corev1.IPv6Protocol && !v6 {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ip, fmt.Sprintf("expected an IPv6 value as indicated by `ipFamilies[%v]`", i)))
			}
		}
	}
	return errs
}

// validateServiceUpdate: the cluster IPs of a Service do not change (unless it is or becomes
// an ExternalName Service, or stays headless), nor its primary IP family.
func validateServiceUpdate(svc, old *corev1.Service) field.ErrorList {
	if svc.Spec.Type == corev1.ServiceTypeExternalName || old.Spec.Type == corev1.ServiceTypeExternalName || headless(svc) && headless(old) {
		return nil
	}
	ips, oldIPs := svc.Spec.ClusterIPs, old.Spec.ClusterIPs
	ipsPath := specPath.Child("clusterIPs")
	var errs field.ErrorList
	switch {
	case len(oldIPs) == len(ips):
		for i, ip := range oldIPs {
			if ip != ips[i] {
				errs = append(errs, field.Invalid(ipsPath.Index(i), ips, "may not change once set"))
			}
		}
	case len(oldIPs) > len(ips):
		if len(ips) == 0 {
			errs = append(errs, field.Invalid(ipsPath.Index(0), ips, "primary clusterIP can not be unset"))
		}
		if len(oldIPs) > 0 && len(ips) > 0 && ips[0] != oldIPs[0] {
			errs = append(errs, field.Invalid(ipsPath.Index(0), ips, "may not change once set"))
		}
	default:
		if len(oldIPs) > 0 && ips[0] != oldIPs[0] {
			errs = append(errs, field.Invalid(ipsPath.Index(0), ips, "may not change once set"))
		}
	}
	if len(old.Spec.IPFamilies) > 0 && len(svc.Spec.IPFamilies) > 0 && old.Spec.IPFamilies[0] != svc.Spec.IPFamilies[0] {
		errs = append(errs, field.Invalid(specPath.Child("ipFamilies").Index(0), svc.Spec.IPFamilies, "may not change once set"))
	}
	return errs
}

// endpointIP is ValidateEndpointIP.
func endpointIP(s string, p *field.Path) field.ErrorList {
	ip := net.ParseIP(s)
	if ip == nil {
		return field.ErrorList{field.Invalid(p, s, "must be a valid IP address")}
	}
	var errs field.ErrorList
	if ip.IsUnspecified() {
		errs = append(errs, field.Invalid(p, s, fmt.Sprintf("may not be unspecified (%v)", s)))
	}
	if ip.IsLoopback() {
		errs = append(errs, field.Invalid(p, s, "may not be in the loopback range (127.0.0.0/8, ::1/128)"))
	}
	if ip.IsLinkLocalUnicast() {
		errs = append(errs, field.Invalid(p, s, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"))
	}
	if ip.IsLinkLocalMulticast() {
		errs = append(errs, field.Invalid(p, s, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"))
	}
	return errs
}

func validateEndpoints(e *corev1.Endpoints) field.ErrorList {
	// The default/kubernetes Endpoints point at opemu's own listener, usually a loopback
	// address (kube-apiserver refuses to advertise one, and needs no exception).
	loopback := e.Namespace == metav1.NamespaceDefault && e.Name == "kubernetes"
	var errs field.ErrorList
	for i := range e.Subsets {
		ss := &e.Subsets[i]
		sp := field.NewPath("subsets").Index(i)
		if len(ss.Addresses) == 0 && len(ss.NotReadyAddresses) == 0 {
			errs = append(errs, field.Required(sp, "must specify `addresses` or `notReadyAddresses`"))
		}
		for j := range ss.Addresses {
			errs = append(errs, validateEndpointAddress(&ss.Addresses[j], sp.Child("addresses").Index(j), loopback)...)
		}
		for j := range ss.NotReadyAddresses {
			errs = append(errs, validateEndpointAddress(&ss.NotReadyAddresses[j], sp.Child("notReadyAddresses").Index(j), loopback)...)
		}
		for j, port := range ss.Ports {
			pp := sp.Child("ports").Index(j)
			if len(ss.Ports) > 1 && port.Name == "" {
				errs = append(errs, field.Required(pp.Child("name"), ""))
			} else if port.Name != "" {
				errs = append(errs, dnsLabel(port.Name, pp.Child("name"))...)
			}
			errs = append(errs, validatePort(port.Port, pp.Child("port"))...)
			if port.Protocol == "" {
				errs = append(errs, field.Required(pp.Child("protocol"), ""))
			} else if !portProtocols.Has(port.Protocol) {
				errs = append(errs, field.NotSupported(pp.Child("protocol"), port.Protocol, sets.List(portProtocols)))
			}
		}
	}
	return errs
}

func validateEndpointAddress(a *corev1.EndpointAddress, p *field.Path, loopback bool) field.ErrorList {
	errs := validation.IsValidIPForLegacyField(p.Child("ip"), a.IP, true, nil)
	if a.Hostname != "" {
		errs = append(errs, dnsLabel(a.Hostname, p.Child("hostname"))...)
	}
	if a.NodeName != nil {
		errs = append(errs, nameErrors(p.Child("nodeName"), *a.NodeName, NameIsDNSSubdomain)...)
	}
	if loopback && net.ParseIP(a.IP).IsLoopback() {
		return errs
	}
	return append(errs, endpointIP(a.IP, p.Child("ip"))...)
}

// validateEndpointsUpdate: subsets that did not change are not validated again (kube-apiserver
// tolerates what older versions accepted): nothing to add, the create rules hold.

var accessModes = sets.New(corev1.ReadWriteOnce, corev1.ReadOnlyMany, corev1.ReadWriteMany, corev1.ReadWriteOncePod)

var volumeModes = sets.New(corev1.PersistentVolumeBlock, corev1.PersistentVolumeFilesystem)

func validatePVC(c *corev1.PersistentVolumeClaim) field.ErrorList {
	return validatePVCSpec(&c.Spec, specPath)
}

// validatePVCSpec is ValidatePersistentVolumeClaimSpec.
func validatePVCSpec(s *corev1.PersistentVolumeClaimSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(s.AccessModes) == 0 {
		errs = append(errs, field.Required(p.Child("accessModes"), "at least 1 access mode is required"))
	}
	if s.Selector != nil {
		errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, p.Child("selector"))...)
	}
	rwop, other := false, false
	for _, m := range s.AccessModes {
		if !accessModes.Has(m) {
			errs = append(errs, field.NotSupported(p.Child("accessModes"), m, sets.List(accessModes)))
		}
		if m == corev1.ReadWriteOncePod {
			rwop = true
		} else if accessModes.Has(m) {
			other = true
		}
	}
	if rwop && other {
		errs = append(errs, field.Forbidden(p.Child("accessModes"), "may not use ReadWriteOncePod with other access modes"))
	}
	sp := p.Child("resources").Key(string(corev1.ResourceStorage))
	if q, ok := s.Resources.Requests[corev1.ResourceStorage]; !ok {
		errs = append(errs, field.Required(sp, ""))
	} else if q.Sign() <= 0 {
		errs = append(errs, field.Invalid(sp, q.String(), "must be greater than zero"))
	}
	if s.StorageClassName != nil && *s.StorageClassName != "" {
		errs = append(errs, nameErrors(p.Child("storageClassName"), *s.StorageClassName, NameIsDNSSubdomain)...)
	}
	if s.VolumeMode != nil && !volumeModes.Has(*s.VolumeMode) {
		errs = append(errs, field.NotSupported(p.Child("volumeMode"), *s.VolumeMode, sets.List(volumeModes)))
	}
	return errs
}

// validatePVCUpdate: a claim's spec does not change after creation, but for its volume name
// (set once) and, once bound, its storage request.
func validatePVCUpdate(c, old *corev1.PersistentVolumeClaim) field.ErrorList {
	next, prev := c.Spec.DeepCopy(), old.Spec.DeepCopy()
	if prev.VolumeName == "" {
		prev.VolumeName = next.VolumeName
	}
	if c.Status.Phase == corev1.ClaimBound && next.Resources.Requests != nil {
		next.Resources.Requests[corev1.ResourceStorage] = old.Spec.Resources.Requests[corev1.ResourceStorage]
	}
	if c.Status.Phase == corev1.ClaimBound {
		next.VolumeAttributesClassName = prev.VolumeAttributesClassName
	}
	var errs field.ErrorList
	if !apiequality.Semantic.DeepEqual(next, prev) {
		errs = append(errs, field.Forbidden(specPath, "spec is immutable after creation except resources.requests and volumeAttributesClassName for bound claims\n"+diff.Diff(internal(prev), internal(next))))
	}
	newSize, oldSize := c.Spec.Resources.Requests[corev1.ResourceStorage], old.Spec.Resources.Requests[corev1.ResourceStorage]
	if newSize.Cmp(oldSize) < 0 {
		errs = append(errs, field.Forbidden(specPath.Child("resources", "requests", "storage"), "field can not be less than previous value"))
	}
	return errs
}

// validatePod is ValidatePodCreate's spec part.
func validatePod(pod *corev1.Pod) field.ErrorList {
	errs := validatePodSpec(&pod.Spec, specPath)
	if len(pod.Spec.EphemeralContainers) > 0 {
		errs = append(errs, field.Forbidden(specPath.Child("ephemeralContainers"), "cannot be set on create"))
	}
	if pod.Spec.NodeName != "" && len(pod.Spec.SchedulingGates) != 0 {
		errs = append(errs, field.Forbidden(specPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return errs
}

// updatablePodSpecFields are what a pod update may change (ValidatePodUpdate's words).
var updatablePodSpecFields = strings.Join([]string{
	"`spec.containers[*].image`", "`spec.initContainers[*].image`", "`spec.activeDeadlineSeconds`",
	"`spec.tolerations` (only additions to existing tolerations)",
	"`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
}, ",")

// validatePodUpdate is ValidatePodUpdate: a pod's spec is fixed but for its containers' images,
// its active deadline (shortened), added tolerations and removed scheduling gates.
func validatePodUpdate(pod, old *corev1.Pod) field.ErrorList {
	var errs field.ErrorList
	for _, cs := range []struct {
		name     string
		now, was []corev1.Container
	}{{"containers", pod.Spec.Containers, old.Spec.Containers}, {"initContainers", pod.Spec.InitContainers, old.Spec.InitContainers}} {
		p := specPath.Child(cs.name)
		if len(cs.now) != len(cs.was) {
			return append(errs, field.Forbidden(p, "pod updates may not add or remove containers"))
		}
		for i, c := range cs.now {
			if c.Image == "" {
				errs = append(errs, field.Required(p.Index(i).Child("image"), ""))
			}
			if strings.TrimSpace(c.Image) != c.Image {
				errs = append(errs, field.Invalid(p.Index(i).Child("image"), c.Image, "must not have leading or trailing whitespace"))
			}
		}
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
		if *d < 0 || *d > 1<<31-1 {
			return append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), *d, validation.InclusiveRangeError(0, 1<<31-1)))
		}
		if o := old.Spec.ActiveDeadlineSeconds; o != nil && *o < *d {
			return append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), *d, "must be less than or equal to previous value"))
		}
	} else if old.Spec.ActiveDeadlineSeconds != nil {
		errs = append(errs, field.Invalid(specPath.Child("activeDeadlineSeconds"), pod.Spec.ActiveDeadlineSeconds, "must not update from a positive integer to nil value"))
	}
	for _, o := range old.Spec.Tolerations {
		found := false
		for _, t := range pod.Spec.Tolerations {
			c := o
			c.TolerationSeconds = t.TolerationSeconds
			if reflect.DeepEqual(c, t) {
				found = true
				break
			}
		}
		if !found {
			errs = append(errs, field.Forbidden(specPath.Child("tolerations"), "existing toleration can not be modified except its tolerationSeconds"))
			break
		}
	}
	if apiequality.Semantic.DeepEqual(pod.Spec, old.Spec) {
		return errs
	}
	munged := pod.Spec.DeepCopy()
	for i := range munged.Containers {
		munged.Containers[i].Image = old.Spec.Containers[i].Image
	}
	for i := range munged.InitContainers {
		munged.InitContainers[i].Image = old.Spec.InitContainers[i].Image
	}
	munged.ActiveDeadlineSeconds = old.Spec.ActiveDeadlineSeconds
	munged.SchedulingGates = old.Spec.SchedulingGates
	munged.Tolerations = old.Spec.Tolerations
	if g := old.Spec.TerminationGracePeriodSeconds; g != nil && *g < 0 && ptrOr(munged.TerminationGracePeriodSeconds) == 1 {
		munged.TerminationGracePeriodSeconds = g
	}
	if !apiequality.Semantic.DeepEqual(*munged, old.Spec) {
		errs = append(errs, field.Forbidden(specPath, "pod updates may not change fields other than "+updatablePodSpecFields+"\n"+diff.Diff(internal(&old.Spec), internal(munged))))
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
			dup := field.Duplicate(tp, internal(t))
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

func validatePort(port int32, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsValidPortNum(int(port)) {
		errs = append(errs, field.Invalid(p, port, msg))
	}
	return errs
}

// internal wraps a value of a k8s.io/api type so that it encodes as kube-apiserver's internal
// type of the same name does: fields by their Go names, none left out, an embedded ObjectMeta
// inline (apimachinery's types, quantities and times as usual). kube-apiserver validates its
// internal types, so the values its causes quote ("Invalid value: {"APIGroup":...}") take
// that form; the internal types list the same fields in the same order as the v1 ones.
func internal(v any) json.Marshaler { return internalValue{v} }

type internalValue struct{ v any }

func (i internalValue) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := writeInternal(&b, reflect.ValueOf(i.v)); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

var objectMetaType = reflect.TypeOf(metav1.ObjectMeta{})

func writeInternal(b *bytes.Buffer, v reflect.Value) error {
	switch v.Kind() {
	case reflect.Invalid:
		b.WriteString("null")
		return nil
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		return writeInternal(b, v.Elem())
	case reflect.Struct:
		if !strings.HasPrefix(v.Type().PkgPath(), "k8s.io/api/") {
			break
		}
		b.WriteByte('{')
		first := true
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Name == "TypeMeta" {
				continue
			}
			if f.Type == objectMetaType {
				raw, err := json.Marshal(v.Field(i).Interface())
				if err != nil {
					return err
				}
				if inner := bytes.TrimSuffix(bytes.TrimPrefix(raw, []byte("{")), []byte("}")); len(inner) > 0 {
					if !first {
						b.WriteByte(',')
					}
					b.Write(inner)
					first = false
				}
				continue
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			b.WriteString(`"` + f.Name + `":`)
			if err := writeInternal(b, v.Field(i)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	case reflect.Slice:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			break
		}
		b.WriteByte('[')
		for i := 0; i < v.Len(); i++ {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeInternal(b, v.Index(i)); err != nil {
				return err
			}
		}
		b.WriteByte(']')
		return nil
	case reflect.Map:
		if v.IsNil() {
			b.WriteString("null")
			return nil
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, c reflect.Value) int { return strings.Compare(a.String(), c.String()) })
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			key, _ := json.Marshal(k.String())
			b.Write(key)
			b.WriteByte(':')
			if err := writeInternal(b, v.MapIndex(k)); err != nil {
				return err
			}
		}
		b.WriteByte('}')
		return nil
	}
	raw, err := json.Marshal(v.Interface())
	if err != nil {
		return err
	}
	b.Write(raw)
	return nil
}
