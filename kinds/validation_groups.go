package kinds

import (
	"fmt"
	"net"
	"net/url"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The other groups' kinds as kube-apiserver validates them: RBAC (rbac/validation),
// networking (Ingress, NetworkPolicy), policy (PodDisruptionBudget) and the admission webhook
// configurations (admissionregistration/validation).

func validateRole(r *rbacv1.Role) field.ErrorList { return validateRules(r.Rules, true) }

func validateClusterRole(r *rbacv1.ClusterRole) field.ErrorList {
	errs := validateRules(r.Rules, false)
	if ar := r.AggregationRule; ar != nil {
		p := field.NewPath("aggregationRule", "clusterRoleSelectors")
		if len(ar.ClusterRoleSelectors) == 0 {
			errs = append(errs, field.Required(p, "at least one clusterRoleSelector required if aggregationRule is non-nil"))
		}
		for i := range ar.ClusterRoleSelectors {
			errs = append(errs, metav1validation.ValidateLabelSelector(&ar.ClusterRoleSelectors[i], metav1validation.LabelSelectorValidationOptions{}, p.Index(i))...)
		}
	}
	return errs
}

// validateRules is ValidatePolicyRule for each rule.
func validateRules(rules []rbacv1.PolicyRule, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	for i, rule := range rules {
		p := field.NewPath("rules").Index(i)
		if len(rule.Verbs) == 0 {
			errs = append(errs, field.Required(p.Child("verbs"), ""))
		}
		if len(rule.NonResourceURLs) > 0 {
			if namespaced {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "namespaced rules cannot apply to non-resource URLs"))
			}
			if len(rule.APIGroups) > 0 || len(rule.Resources) > 0 || len(rule.ResourceNames) > 0 {
				errs = append(errs, field.Invalid(p.Child("nonResourceURLs"), rule.NonResourceURLs, "rules cannot apply to both regular resources and non-resource URLs"))
			}
			continue
		}
		if len(rule.APIGroups) == 0 {
			errs = append(errs, field.Required(p.Child("apiGroups"), "resource rules must supply at least one api group"))
		}
		if len(rule.Resources) == 0 {
			errs = append(errs, field.Required(p.Child("resources"), "resource rules must supply at least one resource"))
		}
	}
	return errs
}

func validateRoleBinding(b *rbacv1.RoleBinding) field.ErrorList {
	return validateBinding(b.RoleRef, b.Subjects, []string{"Role", "ClusterRole"}, true)
}

func validateClusterRoleBinding(b *rbacv1.ClusterRoleBinding) field.ErrorList {
	return validateBinding(b.RoleRef, b.Subjects, []string{"ClusterRole"}, false)
}

func validateBinding(ref rbacv1.RoleRef, subjects []rbacv1.Subject, kinds []string, namespaced bool) field.ErrorList {
	var errs field.ErrorList
	rp := field.NewPath("roleRef")
	if ref.APIGroup != rbacv1.GroupName {
		errs = append(errs, field.NotSupported(rp.Child("apiGroup"), ref.APIGroup, []string{rbacv1.GroupName}))
	}
	if !sets.New(kinds...).Has(ref.Kind) {
		errs = append(errs, field.NotSupported(rp.Child("kind"), ref.Kind, kinds))
	}
	if ref.Name == "" {
		errs = append(errs, field.Required(rp.Child("name"), ""))
	} else {
		errs = append(errs, nameErrors(rp.Child("name"), ref.Name, NameIsPathSegment)...)
	}
	for i, s := range subjects {
		p := field.NewPath("subjects").Index(i)
		if s.Name == "" {
			errs = append(errs, field.Required(p.Child("name"), ""))
		}
		switch s.Kind {
		case rbacv1.ServiceAccountKind:
			if s.Name != "" {
				errs = append(errs, nameErrors(p.Child("name"), s.Name, NameIsDNSSubdomain)...)
			}
			if s.APIGroup != "" {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{""}))
			}
			if !namespaced && s.Namespace == "" {
				errs = append(errs, field.Required(p.Child("namespace"), ""))
			}
		case rbacv1.UserKind, rbacv1.GroupKind:
			if s.APIGroup != rbacv1.GroupName {
				errs = append(errs, field.NotSupported(p.Child("apiGroup"), s.APIGroup, []string{rbacv1.GroupName}))
			}
		default:
			errs = append(errs, field.NotSupported(p.Child("kind"), s.Kind, []string{rbacv1.ServiceAccountKind, rbacv1.UserKind, rbacv1.GroupKind}))
		}
	}
	return errs
}

// validateRoleBindingUpdate: a binding's roleRef does not change.
func validateRoleBindingUpdate(b, old *rbacv1.RoleBinding) field.ErrorList {
	return immutableInternal(b.RoleRef, old.RoleRef, field.NewPath("roleRef"))
}

func validateClusterRoleBindingUpdate(b, old *rbacv1.ClusterRoleBinding) field.ErrorList {
	return immutableInternal(b.RoleRef, old.RoleRef, field.NewPath("roleRef"))
}

var pathTypes = []string{string(networkingv1.PathTypeExact), string(networkingv1.PathTypeImplementationSpecific), string(networkingv1.PathTypePrefix)}

func validateIngress(ing *networkingv1.Ingress) field.ErrorList {
	s := &ing.Spec
	var errs field.ErrorList
	if len(s.Rules) == 0 && s.DefaultBackend == nil {
		errs = append(errs, field.Invalid(specPath, internal(s.Rules), "either `defaultBackend` or `rules` must be specified"))
	}
	if s.DefaultBackend != nil {
		errs = append(errs, validateIngressBackend(s.DefaultBackend, specPath.Child("defaultBackend"))...)
	}
	for i, r := range s.Rules {
		rp := specPath.Child("rules").Index(i)
		if r.Host != "" {
			if net.ParseIP(r.Host) != nil {
				errs = append(errs, field.Invalid(rp.Child("host"), r.Host, "must be a DNS name, not an IP address"))
			}
			if strings.Contains(r.Host, "*") {
				errs = append(errs, stringErrors(rp.Child("host"), r.Host, validation.IsWildcardDNS1123Subdomain(r.Host))...)
			} else {
				errs = append(errs, dnsSubdomain(r.Host, rp.Child("host"))...)
			}
		}
		if r.HTTP == nil {
			continue
		}
		hp := rp.Child("http")
		if len(r.HTTP.Paths) == 0 {
			errs = append(errs, field.Required(hp.Child("paths"), ""))
		}
		for j := range r.HTTP.Paths {
			errs = append(errs, validateIngressPath(&r.HTTP.Paths[j], hp.Child("paths").Index(j))...)
		}
	}
	for i, tls := range s.TLS {
		tp := specPath.Child("tls").Index(i)
		for j, h := range tls.Hosts {
			if strings.Contains(h, "*") {
				errs = append(errs, stringErrors(tp.Child("hosts").Index(j), h, validation.IsWildcardDNS1123Subdomain(h))...)
			} else {
				errs = append(errs, stringErrors(tp.Child("hosts").Index(j), h, validation.IsDNS1123Subdomain(h))...)
			}
		}
		if tls.SecretName != "" {
			errs = append(errs, nameErrors(tp.Child("secretName"), tls.SecretName, NameIsDNSSubdomain)...)
		}
	}
	if s.IngressClassName != nil {
		errs = append(errs, nameErrors(specPath.Child("ingressClassName"), *s.IngressClassName, NameIsDNSSubdomain)...)
	}
	return errs
}

var (
	invalidPathSequences = []string{"//", "/./", "/../", "%2f", "%2F"}
	invalidPathSuffixes  = []string{"/..", "/."}
)

func validateIngressPath(path *networkingv1.HTTPIngressPath, p *field.Path) field.ErrorList {
	if path.PathType == nil {
		return field.ErrorList{field.Required(p.Child("pathType"), "pathType must be specified")}
	}
	var errs field.ErrorList
	switch *path.PathType {
	case networkingv1.PathTypeExact, networkingv1.PathTypePrefix:
		if !strings.HasPrefix(path.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("path"), path.Path, "must be an absolute path"))
		}
		for _, seq := range invalidPathSequences {
			if strings.Contains(path.Path, seq) {
				errs = append(errs, field.Invalid(p.Child("path"), path.Path, fmt.Sprintf("must not contain '%s'", seq)))
			}
		}
		for _, suffix := range invalidPathSuffixes {
			if strings.HasSuffix(path.Path, suffix) {
				errs = append(errs, field.Invalid(p.Child("path"), path.Path, fmt.Sprintf("cannot end with '%s'", suffix)))
			}
		}
	case networkingv1.PathTypeImplementationSpecific:
		if path.Path != "" && !strings.HasPrefix(path.Path, "/") {
			errs = append(errs, field.Invalid(p.Child("path"), path.Path, "must be an absolute path"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("pathType"), *path.PathType, pathTypes))
	}
	return append(errs, validateIngressBackend(&path.Backend, p.Child("backend"))...)
}

func validateIngressBackend(b *networkingv1.IngressBackend, p *field.Path) field.ErrorList {
	switch {
	case b.Resource != nil && b.Service != nil:
		return field.ErrorList{field.Invalid(p, "", "cannot set both resource and service backends")}
	case b.Resource != nil:
		var errs field.ErrorList
		rp := p.Child("resource")
		if b.Resource.Name == "" {
			errs = append(errs, field.Required(rp.Child("name"), ""))
		}
		if b.Resource.Kind == "" {
			errs = append(errs, field.Required(rp.Child("kind"), ""))
		}
		return errs
	case b.Service != nil:
		var errs field.ErrorList
		if b.Service.Name == "" {
			errs = append(errs, field.Required(p.Child("service", "name"), ""))
		} else {
			errs = append(errs, nameErrors(p.Child("service", "name"), b.Service.Name, NameIsDNSLabel)...)
		}
		port := b.Service.Port
		switch {
		case port.Name != "" && port.Number != 0:
			errs = append(errs, field.Invalid(p, "", "cannot set both port name & port number"))
		case port.Name != "":
			errs = append(errs, stringErrors(p.Child("service", "port", "name"), port.Name, validation.IsValidPortName(port.Name))...)
		case port.Number != 0:
			errs = append(errs, validatePort(port.Number, p.Child("service", "port", "number"))...)
		default:
			errs = append(errs, field.Required(p, "port name or number is required"))
		}
		return errs
	}
	return field.ErrorList{field.Invalid(p, "", "resource or service backend is required")}
}

var policyTypes = []string{string(networkingv1.PolicyTypeIngress), string(networkingv1.PolicyTypeEgress)}

func validateNetworkPolicy(np *networkingv1.NetworkPolicy) field.ErrorList {
	s := &np.Spec
	errs := metav1validation.ValidateLabelSelector(&s.PodSelector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("podSelector"))
	for i, in := range s.Ingress {
		ip := specPath.Child("ingress").Index(i)
		for j := range in.Ports {
			errs = append(errs, validatePolicyPort(&in.Ports[j], ip.Child("ports").Index(j))...)
		}
		for j := range in.From {
			errs = append(errs, validatePolicyPeer(&in.From[j], ip.Child("from").Index(j))...)
		}
	}
	for i, out := range s.Egress {
		ep := specPath.Child("egress").Index(i)
		for j := range out.Ports {
			errs = append(errs, validatePolicyPort(&out.Ports[j], ep.Child("ports").Index(j))...)
		}
		for j := range out.To {
			errs = append(errs, validatePolicyPeer(&out.To[j], ep.Child("to").Index(j))...)
		}
	}
	if len(s.PolicyTypes) > len(policyTypes) {
		return append(errs, field.Invalid(specPath.Child("policyTypes"), &s.PolicyTypes, "may not specify more than two policyTypes"))
	}
	for i, t := range s.PolicyTypes {
		if t != networkingv1.PolicyTypeIngress && t != networkingv1.PolicyTypeEgress {
			errs = append(errs, field.NotSupported(specPath.Child("policyTypes").Index(i), t, policyTypes))
		}
	}
	return errs
}

func validatePolicyPort(port *networkingv1.NetworkPolicyPort, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if pr := port.Protocol; pr != nil && !portProtocols.Has(*pr) {
		errs = append(errs, field.NotSupported(p.Child("protocol"), *pr, []string{string(corev1.ProtocolTCP), string(corev1.ProtocolUDP), string(corev1.ProtocolSCTP)}))
	}
	switch {
	case port.Port == nil:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is not specified"))
		}
	case port.Port.Type == intstr.Int:
		errs = append(errs, validatePort(port.Port.IntVal, p.Child("port"))...)
		if port.EndPort != nil {
			if *port.EndPort < port.Port.IntVal {
				errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "must be greater than or equal to `port`"))
			}
			errs = append(errs, validatePort(*port.EndPort, p.Child("endPort"))...)
		}
	default:
		if port.EndPort != nil {
			errs = append(errs, field.Invalid(p.Child("endPort"), *port.EndPort, "may not be specified when `port` is non-numeric"))
		}
		errs = append(errs, stringErrors(p.Child("port"), port.Port.StrVal, validation.IsValidPortName(port.Port.StrVal))...)
	}
	return errs
}

func validatePolicyPeer(peer *networkingv1.NetworkPolicyPeer, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	n := 0
	opts := metav1validation.LabelSelectorValidationOptions{}
	if peer.PodSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.PodSelector, opts, p.Child("podSelector"))...)
	}
	if peer.NamespaceSelector != nil {
		n++
		errs = append(errs, metav1validation.ValidateLabelSelector(peer.NamespaceSelector, opts, p.Child("namespaceSelector"))...)
	}
	if b := peer.IPBlock; b != nil {
		n++
		bp := p.Child("ipBlock")
		if b.CIDR == "" {
			errs = append(errs, field.Required(bp.Child("cidr"), ""))
		} else {
			errs = append(errs, validation.IsValidCIDRForLegacyField(bp.Child("cidr"), b.CIDR, true, nil)...)
			if _, cidr, err := net.ParseCIDR(b.CIDR); err == nil {
				for i, e := range b.Except {
					ep := bp.Child("except").Index(i)
					errs = append(errs, validation.IsValidCIDRForLegacyField(ep, e, true, nil)...)
					_, except, err := net.ParseCIDR(e)
					if err != nil {
						continue
					}
					cidrLen, _ := cidr.Mask.Size()
					exceptLen, _ := except.Mask.Size()
					if !cidr.Contains(except.IP) || cidrLen >= exceptLen {
						errs = append(errs, field.Invalid(ep, e, "must be a strict subset of `cidr`"))
					}
				}
			}
		}
	}
	if n == 0 {
		errs = append(errs, field.Required(p, "must specify a peer"))
	} else if n > 1 && peer.IPBlock != nil {
		errs = append(errs, field.Forbidden(p, "may not specify both ipBlock and another peer"))
	}
	return errs
}

var evictionPolicies = []string{string(policyv1.AlwaysAllow), string(policyv1.IfHealthyBudget)}

func validatePDB(pdb *policyv1.PodDisruptionBudget) field.ErrorList {
	s := &pdb.Spec
	var errs field.ErrorList
	if s.MinAvailable != nil && s.MaxUnavailable != nil {
		errs = append(errs, field.Invalid(specPath, internal(s), "minAvailable and maxUnavailable cannot be both set"))
	}
	for _, f := range []struct {
		name string
		v    *intstr.IntOrString
	}{{"minAvailable", s.MinAvailable}, {"maxUnavailable", s.MaxUnavailable}} {
		if f.v != nil {
			errs = append(errs, positiveIntOrPercent(*f.v, specPath.Child(f.name))...)
			errs = append(errs, notMoreThan100Percent(*f.v, specPath.Child(f.name))...)
		}
	}
	errs = append(errs, metav1validation.ValidateLabelSelector(s.Selector, metav1validation.LabelSelectorValidationOptions{}, specPath.Child("selector"))...)
	if pol := s.UnhealthyPodEvictionPolicy; pol != nil && *pol != policyv1.AlwaysAllow && *pol != policyv1.IfHealthyBudget {
		errs = append(errs, field.NotSupported(specPath.Child("unhealthyPodEvictionPolicy"), *pol, evictionPolicies))
	}
	return errs
}

// webhook is what validating and mutating webhooks share.
type webhookFields struct {
	name                    string
	clientConfig            admissionregistrationv1.WebhookClientConfig
	rules                   []admissionregistrationv1.RuleWithOperations
	failurePolicy           *admissionregistrationv1.FailurePolicyType
	matchPolicy             *admissionregistrationv1.MatchPolicyType
	namespaceSel, objectSel *metav1.LabelSelector
	sideEffects             *admissionregistrationv1.SideEffectClass
	timeoutSeconds          *int32
	admissionReviewVersions []string
}

func validateValidatingWebhookConfiguration(c *admissionregistrationv1.ValidatingWebhookConfiguration) field.ErrorList {
	hooks := make([]webhookFields, len(c.Webhooks))
	for i, w := range c.Webhooks {
		hooks[i] = webhookFields{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions}
	}
	return validateWebhooks(hooks)
}

func validateMutatingWebhookConfiguration(c *admissionregistrationv1.MutatingWebhookConfiguration) field.ErrorList {
	hooks := make([]webhookFields, len(c.Webhooks))
	for i, w := range c.Webhooks {
		hooks[i] = webhookFields{w.Name, w.ClientConfig, w.Rules, w.FailurePolicy, w.MatchPolicy, w.NamespaceSelector, w.ObjectSelector, w.SideEffects, w.TimeoutSeconds, w.AdmissionReviewVersions}
	}
	errs := validateWebhooks(hooks)
	for i, w := range c.Webhooks {
		if rp := w.ReinvocationPolicy; rp != nil && *rp != admissionregistrationv1.NeverReinvocationPolicy && *rp != admissionregistrationv1.IfNeededReinvocationPolicy {
			errs = append(errs, field.NotSupported(field.NewPath("webhooks").Index(i).Child("reinvocationPolicy"), *rp,
				[]string{string(admissionregistrationv1.IfNeededReinvocationPolicy), string(admissionregistrationv1.NeverReinvocationPolicy)}))
		}
	}
	return errs
}

var (
	failurePolicies = []string{string(admissionregistrationv1.Fail), string(admissionregistrationv1.Ignore)}
	matchPolicies   = []string{string(admissionregistrationv1.Equivalent), string(admissionregistrationv1.Exact)}
	noSideEffects   = []string{string(admissionregistrationv1.SideEffectClassNone), string(admissionregistrationv1.SideEffectClassNoneOnDryRun)}
	operations      = sets.New("*", "CONNECT", "CREATE", "DELETE", "UPDATE")
	scopes          = []string{"*", "Cluster", "Namespaced"}
)

// validateWebhooks is validateValidatingWebhook (or Mutating) with the configuration's checks
// of review versions and unique names. A webhook's URL may be http:// (opemu's declared
// difference: kube-apiserver requires https).
func validateWebhooks(hooks []webhookFields) field.ErrorList {
	var errs field.ErrorList
	names := sets.New[string]()
	for i, h := range hooks {
		p := field.NewPath("webhooks").Index(i)
		errs = append(errs, validation.IsFullyQualifiedName(p.Child("name"), h.name)...)
		for j := range h.rules {
			errs = append(errs, validateWebhookRule(&h.rules[j], p.Child("rules").Index(j))...)
		}
		if h.failurePolicy != nil && !sets.New(failurePolicies...).Has(string(*h.failurePolicy)) {
			errs = append(errs, field.NotSupported(p.Child("failurePolicy"), *h.failurePolicy, failurePolicies))
		}
		if h.matchPolicy != nil && !sets.New(matchPolicies...).Has(string(*h.matchPolicy)) {
			errs = append(errs, field.NotSupported(p.Child("matchPolicy"), *h.matchPolicy, matchPolicies))
		}
		if h.sideEffects == nil {
			errs = append(errs, field.Required(p.Child("sideEffects"), "must specify one of "+strings.Join(noSideEffects, ", ")))
		} else if !sets.New(noSideEffects...).Has(string(*h.sideEffects)) {
			errs = append(errs, field.NotSupported(p.Child("sideEffects"), *h.sideEffects, noSideEffects))
		}
		if t := h.timeoutSeconds; t != nil && (*t > 30 || *t < 1) {
			errs = append(errs, field.Invalid(p.Child("timeoutSeconds"), *t, "the timeout value must be between 1 and 30 seconds"))
		}
		for _, sel := range []struct {
			name string
			s    *metav1.LabelSelector
		}{{"namespaceSelector", h.namespaceSel}, {"objectSelector", h.objectSel}} {
			if sel.s != nil {
				errs = append(errs, metav1validation.ValidateLabelSelector(sel.s, metav1validation.LabelSelectorValidationOptions{}, p.Child(sel.name))...)
			}
		}
		cc := h.clientConfig
		switch {
		case (cc.URL == nil) == (cc.Service == nil):
			errs = append(errs, field.Required(p.Child("clientConfig"), "exactly one of url or service is required"))
		case cc.URL != nil:
			errs = append(errs, validateWebhookURL(p.Child("clientConfig", "url"), *cc.URL)...)
		default:
			errs = append(errs, validateWebhookService(p.Child("clientConfig", "service"), cc.Service)...)
		}
		errs = append(errs, validateReviewVersions(h.admissionReviewVersions, p.Child("admissionReviewVersions"))...)
		if h.name != "" {
			if names.Has(h.name) {
				errs = append(errs, field.Duplicate(p.Child("name"), h.name))
			}
			names.Insert(h.name)
		}
	}
	return errs
}

// validateWebhookURL is apiserver's ValidateWebhookURL without its https rule (opemu calls
// http:// webhooks too, a declared difference).
func validateWebhookURL(p *field.Path, raw string) field.ErrorList {
	const form = "; desired format: https://host[/path]"
	u, err := url.Parse(raw)
	if err != nil {
		return field.ErrorList{field.Required(p, "url must be a valid URL: "+err.Error()+form)}
	}
	var errs field.ErrorList
	if u.Host == "" {
		errs = append(errs, field.Invalid(p, u.Host, "host must be specified"+form))
	}
	if u.User != nil {
		errs = append(errs, field.Invalid(p, u.User.String(), "user information is not permitted in the URL"))
	}
	if u.Fragment != "" {
		errs = append(errs, field.Invalid(p, u.Fragment, "fragments are not permitted in the URL"))
	}
	if u.RawQuery != "" {
		errs = append(errs, field.Invalid(p, u.RawQuery, "query parameters are not permitted in the URL"))
	}
	return errs
}

// validateWebhookService is apiserver's ValidateWebhookService, as kube-apiserver calls it: with
// the name and namespace swapped, so a missing namespace is reported as the name's.
func validateWebhookService(p *field.Path, s *admissionregistrationv1.ServiceReference) field.ErrorList {
	var errs field.ErrorList
	if s.Namespace == "" {
		errs = append(errs, field.Required(p.Child("name"), ""))
	}
	if s.Name == "" {
		errs = append(errs, field.Required(p.Child("namespace"), ""))
	}
	port := ptrOr(s.Port)
	if msgs := validation.IsValidPortNum(int(port)); msgs != nil {
		errs = append(errs, field.Invalid(p.Child("port"), port, "port is not valid: "+strings.Join(msgs, ", ")))
	}
	if s.Path == nil || *s.Path == "/" || *s.Path == "" {
		return errs
	}
	path := *s.Path
	if path == "//" {
		return append(errs, field.Invalid(p.Child("path"), path, "segment[0] may not be empty"))
	}
	if !strings.HasPrefix(path, "/") {
		errs = append(errs, field.Invalid(p.Child("path"), path, "must start with a '/'"))
	}
	for i, step := range strings.Split(strings.TrimSuffix(path[1:], "/"), "/") {
		if step == "" {
			errs = append(errs, field.Invalid(p.Child("path"), path, fmt.Sprintf("segment[%d] may not be empty", i)))
			continue
		}
		for _, msg := range validation.IsDNS1123Subdomain(step) {
			errs = append(errs, field.Invalid(p.Child("path"), path, fmt.Sprintf("segment[%d]: %v", i, msg)))
		}
	}
	return errs
}

func validateWebhookRule(r *admissionregistrationv1.RuleWithOperations, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(r.Operations) == 0 {
		errs = append(errs, field.Required(p.Child("operations"), ""))
	}
	for _, op := range r.Operations {
		if op == admissionregistrationv1.OperationAll && len(r.Operations) > 1 {
			errs = append(errs, field.Invalid(p.Child("operations"), r.Operations, "if '*' is present, must not specify other operations"))
			break
		}
	}
	for i, op := range r.Operations {
		if !operations.Has(string(op)) {
			errs = append(errs, field.NotSupported(p.Child("operations").Index(i), op, sets.List(operations)))
		}
	}
	if len(r.APIGroups) == 0 {
		errs = append(errs, field.Required(p.Child("apiGroups"), ""))
	}
	if len(r.APIGroups) > 1 && sets.New(r.APIGroups...).Has("*") {
		errs = append(errs, field.Invalid(p.Child("apiGroups"), r.APIGroups, "if '*' is present, must not specify other API groups"))
	}
	if len(r.APIVersions) == 0 {
		errs = append(errs, field.Required(p.Child("apiVersions"), ""))
	}
	if len(r.APIVersions) > 1 && sets.New(r.APIVersions...).Has("*") {
		errs = append(errs, field.Invalid(p.Child("apiVersions"), r.APIVersions, "if '*' is present, must not specify other API versions"))
	}
	for i, v := range r.APIVersions {
		if v == "" {
			errs = append(errs, field.Required(p.Child("apiVersions").Index(i), ""))
		}
	}
	rp := p.Child("resources")
	if len(r.Resources) == 0 {
		errs = append(errs, field.Required(rp, ""))
	}
	for i, res := range r.Resources {
		if res == "" {
			errs = append(errs, field.Required(rp.Index(i), ""))
		}
	}
	if r.Scope != nil && !sets.New(scopes...).Has(string(*r.Scope)) {
		errs = append(errs, field.NotSupported(p.Child("scope"), *r.Scope, scopes))
	}
	return errs
}

func validateReviewVersions(versions []string, p *field.Path) field.ErrorList {
	accepted := []string{"v1", "v1beta1"}
	if len(versions) == 0 {
		return field.ErrorList{field.Required(p, "must specify one of "+strings.Join(accepted, ", "))}
	}
	var errs field.ErrorList
	seen := sets.New[string]()
	ok := false
	for i, v := range versions {
		if seen.Has(v) {
			errs = append(errs, field.Invalid(p.Index(i), v, "duplicate version"))
			continue
		}
		seen.Insert(v)
		errs = append(errs, stringErrors(p.Index(i), v, validation.IsDNS1035Label(v))...)
		ok = ok || v == "v1" || v == "v1beta1"
	}
	if !ok {
		errs = append(errs, field.Invalid(p, versions, "must include at least one of "+strings.Join(accepted, ", ")))
	}
	return errs
}
