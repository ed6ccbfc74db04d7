package kinds

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"

	"github.com/opemu/opemu/cache"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The kinds operators use (SPEC §14), served from their Go types: adding one is a line here.

func servedTypes() []typed {
	return []typed{
		{obj: &corev1.Namespace{}, cluster: true, short: []string{"ns"}, status: true, finalize: true, columns: namespaceColumns(), nameRule: NameIsDNSLabel, returnDeleted: true,
			fields: []Field{{Name: "status.phase"}, {Name: "name", Path: "metadata.name"}}, defaults: defaulter(defaultNamespace),
			prepareForCreate: prepareNamespace, prepareForUpdate: keepNamespaceFinalizers, canonicalize: labelNamespace},
		{obj: &corev1.Node{}, cluster: true, short: []string{"no"}, status: true, statusOnCreate: true, columns: nodeColumns(),
			fields: []Field{{Name: "spec.unschedulable", Default: "false"}}, defaults: defaulter(defaultNode), validate: validator(validateNode),
			prepareForCreate: taintNewNode},
		{obj: &corev1.ConfigMap{}, short: []string{"cm"}, columns: configMapColumns(), validate: validator(validateConfigMap), validateUpdate: updateValidator(validateConfigMapUpdate)},
		{obj: &corev1.Secret{}, columns: secretColumns(), fields: []Field{{Name: "type"}}, defaults: defaulter(defaultSecret), validate: validator(validateSecret),
			validateUpdate: updateValidator(validateSecretUpdate), warnings: warner(secretWarnings)},
		{obj: &corev1.ServiceAccount{}, short: []string{"sa"}, columns: serviceAccountColumns(), returnDeleted: true},
		{obj: &corev1.Service{}, status: true, short: []string{"svc"}, all: true, columns: serviceColumns(), fields: []Field{{Name: "spec.clusterIP"}, {Name: "spec.type"}},
			defaults: defaulter(defaultService), validate: validator(validateService),
			validateUpdate: updateValidator(validateServiceUpdate), prepareForCreate: allocateService, prepareForUpdate: keepServiceAllocations,
			nameRule: NameIsDNSLabel, createOnUpdate: true, returnDeleted: true},
		{obj: &corev1.Pod{}, status: true, statusResets: []string{"metadata.ownerReferences"}, short: []string{"po"}, all: true, columns: podColumns(), fields: podFields, defaults: defaulter(defaultPod), validate: validator(validatePod),
			validateUpdate: updateValidator(validatePodUpdate), prepareForCreate: preparePod, prepareForUpdate: admitPodUpdate, returnDeleted: true, gracePeriod: podGracePeriod, schedulable: true},
		{obj: &corev1.PersistentVolumeClaim{}, status: true, short: []string{"pvc"}, columns: pvcColumns(), defaults: defaulter(defaultPVC), validate: validator(validatePVC),
			validateUpdate: updateValidator(validatePVCUpdate), prepareForCreate: protectPVC, returnDeleted: true},
		{obj: &corev1.Endpoints{}, plural: "endpoints", short: []string{"ep"}, columns: endpointsColumns(), defaults: defaulter(defaultEndpoints), validate: validator(validateEndpoints),
			createOnUpdate: true},
		{obj: &discoveryv1.EndpointSlice{}, labelsGeneration: true, columns: endpointSliceColumns(), defaults: defaulter(defaultEndpointSlice)},
		{obj: &appsv1.Deployment{}, status: true, statusResets: []string{"metadata.labels"}, short: []string{"deploy"}, all: true, scale: true, columns: deploymentColumns(), defaults: defaulter(defaultDeployment), validate: validator(validateDeployment),
			validateUpdate: updateValidator(validateDeploymentUpdate)},
		{obj: &appsv1.ReplicaSet{}, status: true, short: []string{"rs"}, all: true, scale: true, columns: replicaSetColumns(),
			defaults: defaulter(defaultReplicaSet), validate: validator(validateReplicaSet), validateUpdate: updateValidator(validateReplicaSetUpdate)},
		{obj: &appsv1.StatefulSet{}, status: true, short: []string{"sts"}, all: true, scale: true, columns: statefulSetColumns(), defaults: defaulter(defaultStatefulSet), validate: validator(validateStatefulSet),
			validateUpdate: updateValidator(validateStatefulSetUpdate), nameRule: NameIsDNSLabel},
		{obj: &appsv1.ControllerRevision{}, columns: controllerRevisionColumns()},
		{obj: &appsv1.DaemonSet{}, status: true, short: []string{"ds"}, all: true, columns: daemonSetColumns(), defaults: defaulter(defaultDaemonSet), validate: validator(validateDaemonSet),
			validateUpdate: updateValidator(validateDaemonSetUpdate), prepareForCreate: firstTemplateGeneration, prepareForUpdate: nextTemplateGeneration,
			managedView: templateGenerationView},
		{obj: &batchv1.Job{}, status: true, all: true, columns: jobColumns(), fields: []Field{{Name: "status.successful", Path: "status.succeeded"}}, defaults: defaulter(defaultJob), validate: validator(validateJob), validateCreate: validator(validateGeneratedSelector),
			validateUpdate: updateValidator(validateJobUpdate), afterStamp: generateJobSelector, deletePropagation: metav1.DeletePropagationOrphan, deleteWarning: jobDeleteWarning},
		{obj: &batchv1.CronJob{}, status: true, short: []string{"cj"}, all: true, columns: cronJobColumns(), defaults: defaulter(defaultCronJob), validate: validator(validateCronJob),
			validateCreate: validator(validateCronJobName)},
		{obj: &rbacv1.Role{}, columns: createdAtColumns(), validate: validator(validateRole), nameRule: NameIsPathSegment, createOnUpdate: true},
		{obj: &rbacv1.RoleBinding{}, columns: bindingColumns("RoleBinding"), defaults: defaulter(defaultRoleBinding), validate: validator(validateRoleBinding),
			validateUpdate: updateValidator(validateRoleBindingUpdate), nameRule: NameIsPathSegment, createOnUpdate: true},
		{obj: &rbacv1.ClusterRole{}, cluster: true, columns: createdAtColumns(), validate: validator(validateClusterRole), nameRule: NameIsPathSegment, createOnUpdate: true},
		{obj: &rbacv1.ClusterRoleBinding{}, cluster: true, columns: bindingColumns("ClusterRoleBinding"), defaults: defaulter(defaultClusterRoleBinding), validate: validator(validateClusterRoleBinding),
			validateUpdate: updateValidator(validateClusterRoleBindingUpdate), nameRule: NameIsPathSegment, createOnUpdate: true},
		{obj: &networkingv1.Ingress{}, status: true, short: []string{"ing"}, columns: ingressColumns(), validate: validator(validateIngress)},
		{obj: &networkingv1.NetworkPolicy{}, short: []string{"netpol"}, columns: networkPolicyColumns(), defaults: defaulter(defaultNetworkPolicy), validate: validator(validateNetworkPolicy)},
		{obj: &policyv1.PodDisruptionBudget{}, status: true, short: []string{"pdb"}, columns: pdbColumns(), validate: validator(validatePDB), nameRule: NameIsPathSegment},
		{obj: &admissionregistrationv1.ValidatingWebhookConfiguration{}, cluster: true, extension: true, columns: webhookColumns(), defaults: defaulter(defaultValidatingWebhookConfiguration),
			validate: validator(validateValidatingWebhookConfiguration)},
		{obj: &admissionregistrationv1.MutatingWebhookConfiguration{}, cluster: true, extension: true, columns: webhookColumns(), defaults: defaulter(defaultMutatingWebhookConfiguration),
			validate: validator(validateMutatingWebhookConfiguration)},
		// The admission policies in CEL (package policies runs them); kube's type-checking
		// controller writes a ValidatingAdmissionPolicy's status.
		{obj: &admissionregistrationv1.ValidatingAdmissionPolicy{}, cluster: true, extension: true, status: true, defaults: defaulter(defaultValidatingAdmissionPolicy),
			validate: validator(validateValidatingAdmissionPolicy)},
		{obj: &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}, cluster: true, extension: true, defaults: defaulter(defaultValidatingAdmissionPolicyBinding),
			validate: validator(validateValidatingAdmissionPolicyBinding)},
		{obj: &admissionregistrationv1.MutatingAdmissionPolicy{}, cluster: true, extension: true, defaults: defaulter(defaultMutatingAdmissionPolicy),
			validate: validator(validateMutatingAdmissionPolicy)},
		{obj: &admissionregistrationv1.MutatingAdmissionPolicyBinding{}, cluster: true, extension: true, defaults: defaulter(defaultMutatingAdmissionPolicyBinding),
			validate: validator(validateMutatingAdmissionPolicyBinding)},
	}
}

// podFields are the field selectors kube-apiserver offers for Pods.
var podFields = []Field{
	{Name: "spec.nodeName"}, {Name: "spec.restartPolicy"}, {Name: "spec.schedulerName"}, {Name: "spec.serviceAccountName"},
	{Name: "spec.hostNetwork"}, {Name: "status.phase"}, {Name: "status.podIP"}, {Name: "status.nominatedNodeName"},
}

// typedKinds returns the kinds of servedTypes and the events.k8s.io view, sharing ts.
func typedKinds(ts *typeSet) []*Kind {
	lines := servedTypes()
	out := make([]*Kind, 0, len(lines)+1)
	for _, d := range lines {
		out = append(out, ts.kind(d))
	}
	return append(out, ts.eventsV1Kind())
}

// preparePod gives a new Pod what the default admission plugins give it (admitPodSpec) and the
// status kube-apiserver gives it: Pending, with its QoS class.
func preparePod(obj map[string]any) {
	var pod corev1.Pod
	admitPod(obj, &pod.Spec)
	obj["status"] = map[string]any{"phase": string(corev1.PodPending), "qosClass": string(qosClass(&pod.Spec))}
}

// admitPodUpdate gives an updated Pod what the default admission plugins give it
// (admitPodSpec), as they do on every write.
func admitPodUpdate(obj, _ map[string]any) {
	var spec corev1.PodSpec
	admitPod(obj, &spec)
}

// admitPod decodes obj's spec into spec, applies admitPodSpec and writes back the fields it
// sets, leaving the rest of the spec as sent (pruning, with its warnings, comes after on an
// update). A spec that does not decode is left alone (validation says why).
func admitPod(obj map[string]any, spec *corev1.PodSpec) {
	m, ok := obj["spec"].(map[string]any)
	if !ok {
		return
	}
	raw, err := json.Marshal(m)
	if err != nil || json.Unmarshal(raw, spec) != nil {
		return
	}
	admitPodSpec(spec)
	if raw, err = json.Marshal(spec); err != nil {
		return
	}
	admitted, err := cache.DecodeJSON(raw)
	if err != nil {
		return
	}
	for _, k := range []string{"serviceAccountName", "serviceAccount", "priority", "preemptionPolicy", "tolerations"} {
		if v, ok := admitted[k]; ok {
			m[k] = v
		}
	}
}

// taintNewNode adds the node.kubernetes.io/not-ready:NoSchedule taint to a new Node unless it
// has it, as kube-apiserver's TaintNodesByCondition admission does: the node lifecycle
// controller removes it once the Node is Ready.
func taintNewNode(obj map[string]any) {
	spec, ok := objectAt(obj, "spec")
	if !ok {
		return
	}
	taints, ok := spec["taints"].([]any)
	if !ok && spec["taints"] != nil {
		return
	}
	for _, t := range taints {
		if m, _ := t.(map[string]any); m["key"] == corev1.TaintNodeNotReady && m["effect"] == string(corev1.TaintEffectNoSchedule) {
			return
		}
	}
	spec["taints"] = append(taints, map[string]any{"key": corev1.TaintNodeNotReady, "effect": string(corev1.TaintEffectNoSchedule)})
}

// qosClass is a pod's QoS class: Guaranteed when every container limits CPU and memory and
// requests no different, BestEffort when none requests or limits anything, else Burstable.
func qosClass(s *corev1.PodSpec) corev1.PodQOSClass {
	some, guaranteed := false, true
	for _, cs := range [][]corev1.Container{s.InitContainers, s.Containers} {
		for _, c := range cs {
			r := c.Resources
			if len(r.Requests)+len(r.Limits) > 0 {
				some = true
			}
			for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				lim, ok := r.Limits[name]
				if !ok {
					guaranteed = false
					continue
				}
				if req, ok := r.Requests[name]; ok && req.Cmp(lim) != 0 {
					guaranteed = false
				}
			}
		}
	}
	switch {
	case !some:
		return corev1.PodQOSBestEffort
	case guaranteed:
		return corev1.PodQOSGuaranteed
	}
	return corev1.PodQOSBurstable
}

// KubernetesServiceIP is the cluster IP of the default/kubernetes Service: the first of the
// service range, which kube-apiserver keeps for it.
const KubernetesServiceIP = "10.96.0.1"

// allocateService gives a new Service what kube-apiserver allocates: a cluster IP (from
// 10.96.0.0/12, at random but never KubernetesServiceIP: opemu runs no allocator, so two
// Services may rarely share one), its
// IP family, and node ports for NodePort and LoadBalancer Services.
func allocateService(obj map[string]any) {
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		return
	}
	typ, _ := spec["type"].(string)
	if typ == "" {
		typ = string(corev1.ServiceTypeClusterIP)
	}
	if typ == string(corev1.ServiceTypeExternalName) {
		// Not an ExternalName Service's (kube-apiserver drops it on every read).
		delete(spec, "internalTrafficPolicy")
		return
	}
	ip, _ := spec["clusterIP"].(string)
	if ip == "" {
		for ip == "" || ip == KubernetesServiceIP {
			ip = fmt.Sprintf("10.%d.%d.%d", 96+rand.IntN(16), rand.IntN(256), 1+rand.IntN(254))
		}
		spec["clusterIP"] = ip
	}
	if _, ok := spec["clusterIPs"]; !ok {
		spec["clusterIPs"] = []any{ip}
	}
	if _, ok := spec["ipFamilies"]; !ok {
		spec["ipFamilies"] = []any{string(corev1.IPv4Protocol)}
	}
	if _, ok := spec["ipFamilyPolicy"]; !ok {
		spec["ipFamilyPolicy"] = string(corev1.IPFamilyPolicySingleStack)
	}
	if typ == string(corev1.ServiceTypeNodePort) || typ == string(corev1.ServiceTypeLoadBalancer) {
		ports, _ := spec["ports"].([]any)
		for _, p := range ports {
			if m, ok := p.(map[string]any); ok && m["nodePort"] == nil {
				m["nodePort"] = json.Number(fmt.Sprint(30000 + rand.IntN(2768)))
			}
		}
	}
}

// keepServiceAllocations keeps what was allocated to a Service when an update leaves it out
// (as kube-apiserver does, so a client-side apply or a CreateOrUpdate that rebuilds the spec
// does not lose its cluster IP), then allocates what is still missing.
func keepServiceAllocations(obj, old map[string]any) {
	spec, ok := obj["spec"].(map[string]any)
	oldSpec, ok2 := old["spec"].(map[string]any)
	if ok && ok2 {
		dropTypeDependentFields(obj, spec, oldSpec)
	}
	if ok && ok2 && spec["type"] != string(corev1.ServiceTypeExternalName) {
		typ, _ := spec["type"].(string)
		for _, k := range []string{"clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"} {
			if v, has := oldSpec[k]; has && (spec[k] == nil || spec[k] == "") {
				spec[k] = v
			}
		}
		if typ != string(corev1.ServiceTypeNodePort) && typ != string(corev1.ServiceTypeLoadBalancer) {
			allocateService(obj)
			return
		}
		nodePorts := map[string]any{}
		oldPorts, _ := oldSpec["ports"].([]any)
		for _, p := range oldPorts {
			if m, ok := p.(map[string]any); ok && m["nodePort"] != nil {
				name, _ := m["name"].(string)
				nodePorts[name] = m["nodePort"]
			}
		}
		ports, _ := spec["ports"].([]any)
		for _, p := range ports {
			if m, ok := p.(map[string]any); ok && m["nodePort"] == nil {
				name, _ := m["name"].(string)
				if np, ok := nodePorts[name]; ok {
					m["nodePort"] = np
				}
			}
		}
	}
	allocateService(obj)
}

// dropTypeDependentFields is the Service strategy's: a Service whose type no longer needs what
// its old type was given (cluster IPs, node ports, a load balancer's fields) loses them, when
// the update left them as they were.
func dropTypeDependentFields(obj, spec, oldSpec map[string]any) {
	typ, oldTyp := serviceType(spec), serviceType(oldSpec)
	same := func(k string) bool { return reflect.DeepEqual(spec[k], oldSpec[k]) }
	nodePorts := func(t corev1.ServiceType) bool {
		return t == corev1.ServiceTypeNodePort || t == corev1.ServiceTypeLoadBalancer
	}
	external := func(t corev1.ServiceType, s map[string]any) bool {
		ips, _ := s["externalIPs"].([]any)
		return nodePorts(t) || len(ips) > 0
	}
	if oldTyp != corev1.ServiceTypeExternalName && typ == corev1.ServiceTypeExternalName {
		if same("clusterIP") && same("clusterIPs") {
			delete(spec, "clusterIP")
			delete(spec, "clusterIPs")
		}
		for _, k := range []string{"ipFamilies", "ipFamilyPolicy"} {
			if same(k) {
				delete(spec, k)
			}
		}
	}
	if nodePorts(oldTyp) && !nodePorts(typ) && sameNodePorts(spec, oldSpec) {
		ports, _ := spec["ports"].([]any)
		for _, p := range ports {
			if m, ok := p.(map[string]any); ok {
				delete(m, "nodePort")
			}
		}
	}
	if oldTyp == corev1.ServiceTypeLoadBalancer && typ != corev1.ServiceTypeLoadBalancer {
		for _, k := range []string{"allocateLoadBalancerNodePorts", "loadBalancerClass", "healthCheckNodePort"} {
			if same(k) {
				delete(spec, k)
			}
		}
	}
	if external(oldTyp, oldSpec) && !external(typ, spec) && same("externalTrafficPolicy") {
		delete(spec, "externalTrafficPolicy")
	}
	if typ != corev1.ServiceTypeLoadBalancer {
		if st, ok := obj["status"].(map[string]any); ok {
			st["loadBalancer"] = map[string]any{}
		}
	}
}

// serviceType is a Service spec's type, ClusterIP when unset.
func serviceType(spec map[string]any) corev1.ServiceType {
	if t, _ := spec["type"].(string); t != "" {
		return corev1.ServiceType(t)
	}
	return corev1.ServiceTypeClusterIP
}

// sameNodePorts reports whether the ports of spec kept old's node ports, port by port.
func sameNodePorts(spec, old map[string]any) bool {
	ports, _ := spec["ports"].([]any)
	oldPorts, _ := old["ports"].([]any)
	for i, p := range ports {
		if i >= len(oldPorts) {
			return false
		}
		m, _ := p.(map[string]any)
		o, _ := oldPorts[i].(map[string]any)
		if !reflect.DeepEqual(m["nodePort"], o["nodePort"]) {
			return false
		}
	}
	return true
}

// podGracePeriod is a Pod's grace period on delete, as kube-apiserver's pod strategy
// (CheckGracefulDelete) computes it: the one asked for, else spec.terminationGracePeriodSeconds
// (defaulted to 30); none for a Pod bound to no node or already finished; a negative one is 1.
func podGracePeriod(obj map[string]any, requested *int64) int64 {
	spec, _ := obj["spec"].(map[string]any)
	status, _ := obj["status"].(map[string]any)
	period := int64(0)
	if requested != nil {
		period = *requested
	} else if n, ok := spec["terminationGracePeriodSeconds"].(json.Number); ok {
		period, _ = n.Int64()
	}
	if name, _ := spec["nodeName"].(string); name == "" {
		period = 0
	}
	if phase, _ := status["phase"].(string); phase == string(corev1.PodFailed) || phase == string(corev1.PodSucceeded) {
		period = 0
	}
	if period < 0 {
		period = 1
	}
	return period
}
