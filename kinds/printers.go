package kinds

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/sets"
)

// The Table columns kubectl users know for the built-in kinds (kube-apiserver's printers,
// k8s.io/kubernetes/pkg/printers/internalversion), computed from the decoded object.

const none = "<none>"

// column is a Column computed by f, described by the printers' own words (desc).
func column(name, typ string, priority int32, desc string, f func(obj map[string]any, now time.Time) any) Column {
	return Column{Def: metav1.TableColumnDefinition{Name: name, Type: typ, Priority: priority, Description: desc}, Cell: f}
}

// docColumn is a Column computed by f, described by the SwaggerDoc of field of the Go type
// whose OpenAPI name is of, as the printers describe it.
func docColumn(name, typ string, priority int32, of, field string, f func(obj map[string]any, now time.Time) any) Column {
	return Column{Def: metav1.TableColumnDefinition{Name: name, Type: typ, Priority: priority}, Doc: [2]string{of, field}, Cell: f}
}

// ageColumn is the printers' Age: a string, "<unknown>" without a creation time.
func ageColumn() Column {
	return docColumn("Age", "string", 0, objectMeta, "creationTimestamp", func(obj map[string]any, now time.Time) any {
		return Age(stringAt(obj, "metadata.creationTimestamp"), now)
	})
}

// The OpenAPI names of the Go types whose descriptions the printers' columns carry.
const (
	coreV1  = "io.k8s.api.core.v1."
	appsV1  = "io.k8s.api.apps.v1."
	batchV1 = "io.k8s.api.batch.v1."
)

// Descriptions the printers give several kinds' columns.
const (
	containersDesc = "Names of each container in the template."
	imagesDesc     = "Images referenced by each container in the template."
	readyDesc      = "Number of the pod with ready state"
)

// stringCell is the string at path ("" when absent).
func stringCell(path string) func(map[string]any, time.Time) any {
	return func(obj map[string]any, _ time.Time) any { return stringAt(obj, path) }
}

func intAt(obj map[string]any, path string) int64 {
	v, _ := ValueAt(obj, path)
	if n, ok := v.(json.Number); ok {
		i, _ := n.Int64()
		return i
	}
	return 0
}

func mapAt(obj map[string]any, path string) map[string]any {
	v, _ := ValueAt(obj, path)
	m, _ := v.(map[string]any)
	return m
}

func listAt(obj map[string]any, path string) []any {
	v, _ := ValueAt(obj, path)
	l, _ := v.([]any)
	return l
}

func orNone(s string) string {
	if s == "" {
		return none
	}
	return s
}

// containersColumns are the -o wide Containers and Images columns of a pod template at keys.
func containersColumns(path string) []Column {
	each := func(field string) func(map[string]any, time.Time) any {
		return func(obj map[string]any, _ time.Time) any {
			var out []string
			for _, c := range listAt(obj, path+".containers") {
				m, _ := c.(map[string]any)
				out = append(out, stringAt(m, field))
			}
			return strings.Join(out, ",")
		}
	}
	return []Column{column("Containers", "string", 1, containersDesc, each("name")), column("Images", "string", 1, imagesDesc, each("image"))}
}

// selectorColumn is the -o wide Selector column of a label selector at path, described by
// field of the type of.
func selectorColumn(path, of, field string) Column {
	return docColumn("Selector", "string", 1, of, field, func(obj map[string]any, _ time.Time) any {
		raw, _ := json.Marshal(mapAt(obj, path))
		var sel metav1.LabelSelector
		if json.Unmarshal(raw, &sel) != nil {
			return none
		}
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil || s.Empty() {
			return none
		}
		return s.String()
	})
}

// labelsCell shows a map of labels (a Service's selector) as the printers format them.
func labelsCell(path string) func(map[string]any, time.Time) any {
	return func(obj map[string]any, _ time.Time) any {
		set := labels.Set{}
		for k, v := range mapAt(obj, path) {
			set[k], _ = v.(string)
		}
		return labels.FormatLabels(set)
	}
}

// intCell is the integer at path, 0 when absent (as the printers show a Go type's zero).
func intCell(path string) func(map[string]any, time.Time) any {
	return func(obj map[string]any, _ time.Time) any { return intAt(obj, path) }
}

// countCell counts the members of the maps and lists at paths.
func countCell(paths ...string) func(map[string]any, time.Time) any {
	return func(obj map[string]any, _ time.Time) any {
		n := 0
		for _, p := range paths {
			v, _ := ValueAt(obj, p)
			switch v := v.(type) {
			case map[string]any:
				n += len(v)
			case []any:
				n += len(v)
			}
		}
		return int64(n)
	}
}

func podColumns() []Column {
	return []Column{
		NameColumn,
		column("Ready", "string", 0, "The aggregate readiness state of this pod for accepting traffic.", func(obj map[string]any, _ time.Time) any {
			ready := 0
			for _, cs := range listAt(obj, "status.containerStatuses") {
				if m, _ := cs.(map[string]any); m["ready"] == true {
					ready++
				}
			}
			return fmt.Sprintf("%d/%d", ready, len(listAt(obj, "spec.containers")))
		}),
		column("Status", "string", 0, "The aggregate status of the containers in this pod.", podStatus),
		column("Restarts", "string", 0, "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
			func(obj map[string]any, _ time.Time) any {
				var n int64
				for _, cs := range listAt(obj, "status.containerStatuses") {
					m, _ := cs.(map[string]any)
					n += intAt(m, "restartCount")
				}
				return strconv.FormatInt(n, 10)
			}),
		ageColumn(),
		docColumn("IP", "string", 1, coreV1+"PodStatus", "podIP", func(obj map[string]any, _ time.Time) any {
			ips := listAt(obj, "status.podIPs")
			if len(ips) == 0 {
				return none
			}
			m, _ := ips[0].(map[string]any)
			return orNone(stringAt(m, "ip"))
		}),
		docColumn("Node", "string", 1, coreV1+"PodSpec", "nodeName", func(obj map[string]any, _ time.Time) any { return orNone(stringAt(obj, "spec.nodeName")) }),
		docColumn("Nominated Node", "string", 1, coreV1+"PodStatus", "nominatedNodeName", func(obj map[string]any, _ time.Time) any {
			return orNone(stringAt(obj, "status.nominatedNodeName"))
		}),
		docColumn("Readiness Gates", "string", 1, coreV1+"PodSpec", "readinessGates", readinessGates),
	}
}

// readinessGates is how many of a Pod's readiness gates its conditions say are True.
func readinessGates(obj map[string]any, _ time.Time) any {
	gates := listAt(obj, "spec.readinessGates")
	if len(gates) == 0 {
		return none
	}
	ok := 0
	for _, g := range gates {
		gm, _ := g.(map[string]any)
		for _, c := range listAt(obj, "status.conditions") {
			cm, _ := c.(map[string]any)
			if stringAt(cm, "type") == stringAt(gm, "conditionType") {
				if stringAt(cm, "status") == "True" {
					ok++
				}
				break
			}
		}
	}
	return fmt.Sprintf("%d/%d", ok, len(gates))
}

// podStatus is the STATUS kubectl shows: the phase, or the reason of the pod or of a container
// that is not running, or Terminating.
func podStatus(obj map[string]any, _ time.Time) any {
	reason := stringAt(obj, "status.phase")
	if r := stringAt(obj, "status.reason"); r != "" {
		reason = r
	}
	for _, cs := range listAt(obj, "status.containerStatuses") {
		m, _ := cs.(map[string]any)
		if r := stringAt(m, "state.waiting.reason"); r != "" {
			reason = r
		} else if r := stringAt(m, "state.terminated.reason"); r != "" {
			reason = r
		}
	}
	if stringAt(obj, "metadata.deletionTimestamp") != "" {
		reason = "Terminating"
	}
	return reason
}

func deploymentColumns() []Column {
	return append([]Column{
		NameColumn,
		column("Ready", "string", 0, readyDesc, func(obj map[string]any, _ time.Time) any {
			return fmt.Sprintf("%d/%d", intAt(obj, "status.readyReplicas"), intAt(obj, "spec.replicas"))
		}),
		docColumn("Up-to-date", "string", 0, appsV1+"DeploymentStatus", "updatedReplicas", intCell("status.updatedReplicas")),
		docColumn("Available", "string", 0, appsV1+"DeploymentStatus", "availableReplicas", intCell("status.availableReplicas")),
		ageColumn(),
	}, append(containersColumns("spec.template.spec"), selectorColumn("spec.selector", appsV1+"DeploymentSpec", "selector"))...)
}

func replicaSetColumns() []Column {
	return append([]Column{
		NameColumn,
		docColumn("Desired", "integer", 0, appsV1+"ReplicaSetSpec", "replicas", intCell("spec.replicas")),
		docColumn("Current", "integer", 0, appsV1+"ReplicaSetStatus", "replicas", intCell("status.replicas")),
		docColumn("Ready", "integer", 0, appsV1+"ReplicaSetStatus", "readyReplicas", intCell("status.readyReplicas")),
		ageColumn(),
	}, append(containersColumns("spec.template.spec"), selectorColumn("spec.selector", appsV1+"ReplicaSetSpec", "selector"))...)
}

func statefulSetColumns() []Column {
	return append([]Column{
		NameColumn,
		column("Ready", "string", 0, readyDesc, func(obj map[string]any, _ time.Time) any {
			return fmt.Sprintf("%d/%d", intAt(obj, "status.readyReplicas"), intAt(obj, "spec.replicas"))
		}),
		ageColumn(),
	}, containersColumns("spec.template.spec")...)
}

// controllerRevisionColumns are the printers' ControllerRevision columns: its controller as
// <kind>.<group>/<name>, and its revision.
func controllerRevisionColumns() []Column {
	return []Column{
		NameColumn,
		column("Controller", "string", 0, "Controller of the object", func(obj map[string]any, _ time.Time) any {
			for _, r := range listAt(obj, "metadata.ownerReferences") {
				ref, _ := r.(map[string]any)
				if c, _ := ref["controller"].(bool); !c {
					continue
				}
				kind, _ := ref["kind"].(string)
				apiVersion, _ := ref["apiVersion"].(string)
				name, _ := ref["name"].(string)
				kind = strings.ToLower(kind)
				if group, _, ok := strings.Cut(apiVersion, "/"); ok {
					kind += "." + group
				}
				return kind + "/" + name
			}
			return none
		}),
		docColumn("Revision", "string", 0, appsV1+"ControllerRevision", "revision", intCell("revision")),
		ageColumn(),
	}
}

func daemonSetColumns() []Column {
	n := func(name, field string) Column {
		return docColumn(name, "integer", 0, appsV1+"DaemonSetStatus", field, intCell("status."+field))
	}
	return append([]Column{
		NameColumn, n("Desired", "desiredNumberScheduled"), n("Current", "currentNumberScheduled"), n("Ready", "numberReady"),
		n("Up-to-date", "updatedNumberScheduled"), n("Available", "numberAvailable"),
		docColumn("Node Selector", "string", 0, coreV1+"PodSpec", "nodeSelector", labelsCell("spec.template.spec.nodeSelector")),
		ageColumn(),
	}, append(containersColumns("spec.template.spec"), selectorColumn("spec.selector", appsV1+"DaemonSetSpec", "selector"))...)
}

func jobColumns() []Column {
	return append([]Column{
		NameColumn,
		column("Status", "string", 0, "Status of the job.", jobStatus),
		docColumn("Completions", "string", 0, batchV1+"JobStatus", "succeeded", func(obj map[string]any, _ time.Time) any {
			if _, ok := ValueAt(obj, "spec.completions"); ok {
				return fmt.Sprintf("%d/%d", intAt(obj, "status.succeeded"), intAt(obj, "spec.completions"))
			}
			if p := intAt(obj, "spec.parallelism"); p > 1 {
				return fmt.Sprintf("%d/1 of %d", intAt(obj, "status.succeeded"), p)
			}
			return fmt.Sprintf("%d/1", intAt(obj, "status.succeeded"))
		}),
		column("Duration", "string", 0, "Time required to complete the job.", func(obj map[string]any, now time.Time) any {
			start, err := time.Parse(time.RFC3339, stringAt(obj, "status.startTime"))
			if err != nil {
				return ""
			}
			end := now
			if t, err := time.Parse(time.RFC3339, stringAt(obj, "status.completionTime")); err == nil {
				end = t
			}
			return duration.HumanDuration(end.Sub(start))
		}),
		ageColumn(),
	}, append(containersColumns("spec.template.spec"), selectorColumn("spec.selector", batchV1+"JobSpec", "selector"))...)
}

// jobStatus is the STATUS kubectl shows for a Job, from its conditions.
func jobStatus(obj map[string]any, _ time.Time) any {
	has := func(t string) bool {
		for _, c := range listAt(obj, "status.conditions") {
			m, _ := c.(map[string]any)
			if stringAt(m, "type") == t && stringAt(m, "status") == "True" {
				return true
			}
		}
		return false
	}
	switch {
	case has("Complete"):
		return "Complete"
	case has("Failed"):
		return "Failed"
	case stringAt(obj, "metadata.deletionTimestamp") != "":
		return "Terminating"
	case has("Suspended"):
		return "Suspended"
	case has("FailureTarget"):
		return "FailureTarget"
	case has("SuccessCriteriaMet"):
		return "SuccessCriteriaMet"
	}
	return "Running"
}

func cronJobColumns() []Column {
	return append([]Column{
		NameColumn,
		docColumn("Schedule", "string", 0, batchV1+"CronJobSpec", "schedule", stringCell("spec.schedule")),
		docColumn("Timezone", "string", 0, batchV1+"CronJobSpec", "timeZone", func(obj map[string]any, _ time.Time) any { return orNone(stringAt(obj, "spec.timeZone")) }),
		docColumn("Suspend", "boolean", 0, batchV1+"CronJobSpec", "suspend", func(obj map[string]any, _ time.Time) any {
			// The printers show the flag as text.
			switch v, _ := ValueAt(obj, "spec.suspend"); v {
			case true:
				return "True"
			case false:
				return "False"
			}
			return "<unset>"
		}),
		docColumn("Active", "integer", 0, batchV1+"CronJobStatus", "active", func(obj map[string]any, _ time.Time) any { return int64(len(listAt(obj, "status.active"))) }),
		docColumn("Last Schedule", "string", 0, batchV1+"CronJobStatus", "lastScheduleTime", func(obj map[string]any, now time.Time) any {
			if s := stringAt(obj, "status.lastScheduleTime"); s != "" {
				return Age(s, now)
			}
			return none
		}),
		ageColumn(),
	}, append(containersColumns("spec.jobTemplate.spec.template.spec"), selectorColumn("spec.jobTemplate.spec.selector", batchV1+"JobSpec", "selector"))...)
}

func serviceColumns() []Column {
	spec := coreV1 + "ServiceSpec"
	return []Column{
		NameColumn,
		docColumn("Type", "string", 0, spec, "type", stringCell("spec.type")),
		docColumn("Cluster-IP", "string", 0, spec, "clusterIP", func(obj map[string]any, _ time.Time) any {
			if ips := listAt(obj, "spec.clusterIPs"); len(ips) > 0 {
				s, _ := ips[0].(string)
				return s
			}
			return none
		}),
		docColumn("External-IP", "string", 0, spec, "externalIPs", serviceExternalIP),
		docColumn("Port(s)", "string", 0, spec, "ports", func(obj map[string]any, _ time.Time) any {
			var out []string
			for _, p := range listAt(obj, "spec.ports") {
				m, _ := p.(map[string]any)
				s := strconv.FormatInt(intAt(m, "port"), 10)
				if np := intAt(m, "nodePort"); np > 0 {
					s += ":" + strconv.FormatInt(np, 10)
				}
				out = append(out, s+"/"+stringAt(m, "protocol"))
			}
			if len(out) == 0 {
				return none
			}
			return strings.Join(out, ",")
		}),
		ageColumn(),
		docColumn("Selector", "string", 1, spec, "selector", labelsCell("spec.selector")),
	}
}

// serviceExternalIP is the EXTERNAL-IP kubectl shows for a Service.
func serviceExternalIP(obj map[string]any, _ time.Time) any {
	var ips []string
	for _, ip := range listAt(obj, "spec.externalIPs") {
		s, _ := ip.(string)
		ips = append(ips, s)
	}
	switch stringAt(obj, "spec.type") {
	case "ExternalName":
		return stringAt(obj, "spec.externalName")
	case "LoadBalancer":
		for _, in := range listAt(obj, "status.loadBalancer.ingress") {
			m, _ := in.(map[string]any)
			if ip := stringAt(m, "ip"); ip != "" {
				ips = append(ips, ip)
			} else if h := stringAt(m, "hostname"); h != "" {
				ips = append(ips, h)
			}
		}
		if len(ips) == 0 {
			return "<pending>"
		}
	}
	if len(ips) == 0 {
		return none
	}
	return strings.Join(ips, ",")
}

func configMapColumns() []Column {
	return []Column{NameColumn, docColumn("Data", "string", 0, coreV1+"ConfigMap", "data", countCell("data", "binaryData")), ageColumn()}
}

func secretColumns() []Column {
	return []Column{
		NameColumn, docColumn("Type", "string", 0, coreV1+"Secret", "type", stringCell("type")),
		docColumn("Data", "string", 0, coreV1+"Secret", "data", countCell("data")), ageColumn(),
	}
}

func serviceAccountColumns() []Column {
	return []Column{NameColumn, ageColumn()}
}

func endpointsColumns() []Column {
	return []Column{
		NameColumn,
		docColumn("Endpoints", "string", 0, coreV1+"Endpoints", "subsets", func(obj map[string]any, _ time.Time) any {
			var out []string
			for _, s := range listAt(obj, "subsets") {
				m, _ := s.(map[string]any)
				for _, a := range listAt(m, "addresses") {
					am, _ := a.(map[string]any)
					ports := listAt(m, "ports")
					if len(ports) == 0 {
						out = append(out, stringAt(am, "ip"))
					}
					for _, p := range ports {
						pm, _ := p.(map[string]any)
						out = append(out, fmt.Sprintf("%s:%d", stringAt(am, "ip"), intAt(pm, "port")))
					}
				}
			}
			if len(out) == 0 {
				return none
			}
			return strings.Join(out, ",")
		}),
		ageColumn(),
	}
}

func pvcColumns() []Column {
	spec, status := coreV1+"PersistentVolumeClaimSpec", coreV1+"PersistentVolumeClaimStatus"
	bound := func(obj map[string]any) bool { return stringAt(obj, "spec.volumeName") != "" }
	orUnset := func(path string) func(map[string]any, time.Time) any {
		return func(obj map[string]any, _ time.Time) any {
			if v, ok := ValueAt(obj, path); ok {
				s, _ := v.(string)
				return s
			}
			return "<unset>"
		}
	}
	return []Column{
		NameColumn,
		docColumn("Status", "string", 0, status, "phase", func(obj map[string]any, _ time.Time) any {
			if stringAt(obj, "metadata.deletionTimestamp") != "" {
				return "Terminating"
			}
			return stringAt(obj, "status.phase")
		}),
		docColumn("Volume", "string", 0, spec, "volumeName", stringCell("spec.volumeName")),
		docColumn("Capacity", "string", 0, status, "capacity", func(obj map[string]any, _ time.Time) any {
			if !bound(obj) {
				return ""
			}
			return stringAt(obj, "status.capacity.storage")
		}),
		docColumn("Access Modes", "string", 0, status, "accessModes", func(obj map[string]any, _ time.Time) any {
			if !bound(obj) {
				return ""
			}
			short := map[string]string{"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}
			var out []string
			for _, m := range listAt(obj, "status.accessModes") {
				s, _ := m.(string)
				out = append(out, short[s])
			}
			return strings.Join(out, ",")
		}),
		column("StorageClass", "string", 0, "StorageClass of the pvc", func(obj map[string]any, _ time.Time) any {
			// The beta annotation first, as kube-apiserver's GetPersistentVolumeClaimClass.
			if c, ok := mapAt(obj, "metadata.annotations")["volume.beta.kubernetes.io/storage-class"].(string); ok {
				return c
			}
			return stringAt(obj, "spec.storageClassName")
		}),
		column("VolumeAttributesClass", "string", 0, "VolumeAttributesClass of the pvc", orUnset("spec.volumeAttributesClassName")),
		ageColumn(),
		docColumn("VolumeMode", "string", 1, spec, "volumeMode", orUnset("spec.volumeMode")),
	}
}

func ingressColumns() []Column {
	return []Column{
		NameColumn,
		column("Class", "string", 0, "The name of the IngressClass resource that should be used for additional configuration", func(obj map[string]any, _ time.Time) any {
			return orNone(stringAt(obj, "spec.ingressClassName"))
		}),
		column("Hosts", "string", 0, "Hosts that incoming requests are matched against before the ingress rule", func(obj map[string]any, _ time.Time) any {
			var hosts []string
			for _, r := range listAt(obj, "spec.rules") {
				m, _ := r.(map[string]any)
				if h := stringAt(m, "host"); h != "" {
					hosts = append(hosts, h)
				}
			}
			if len(hosts) == 0 {
				return "*"
			}
			return strings.Join(hosts, ",")
		}),
		column("Address", "string", 0, "Address is a list containing ingress points for the load-balancer", func(obj map[string]any, _ time.Time) any {
			var out []string
			for _, in := range listAt(obj, "status.loadBalancer.ingress") {
				m, _ := in.(map[string]any)
				out = append(out, stringAt(m, "ip")+stringAt(m, "hostname"))
			}
			return strings.Join(out, ",")
		}),
		column("Ports", "string", 0, "Ports of TLS configurations that open", func(obj map[string]any, _ time.Time) any {
			if len(listAt(obj, "spec.tls")) > 0 {
				return "80, 443"
			}
			return "80"
		}),
		ageColumn(),
	}
}

// createdAtColumns are the columns of the kinds the printers have none for (RBAC roles):
// kube-apiserver's default Table shows the creation time itself.
func createdAtColumns() []Column {
	return []Column{NameColumn, docColumn("Created At", "date", 0, objectMeta, "creationTimestamp", stringCell("metadata.creationTimestamp"))}
}

// bindingColumns are a RoleBinding's or ClusterRoleBinding's (kind): its role, then with -o
// wide its subjects by kind, as rbac.SubjectsStrings sorts them.
func bindingColumns(kind string) []Column {
	subjects := func(of string) func(map[string]any, time.Time) any {
		return func(obj map[string]any, _ time.Time) any {
			var out []string
			for _, s := range listAt(obj, "subjects") {
				m, _ := s.(map[string]any)
				if stringAt(m, "kind") != of {
					continue
				}
				name := stringAt(m, "name")
				if of == "ServiceAccount" {
					name = stringAt(m, "namespace") + "/" + name
				}
				out = append(out, name)
			}
			return strings.Join(out, ", ")
		}
	}
	lower := strings.ToLower(kind[:1]) + kind[1:]
	return []Column{
		NameColumn,
		docColumn("Role", "string", 0, "io.k8s.api.rbac.v1beta1."+kind, "roleRef", func(obj map[string]any, _ time.Time) any {
			return stringAt(obj, "roleRef.kind") + "/" + stringAt(obj, "roleRef.name")
		}),
		ageColumn(),
		column("Users", "string", 1, "Users in the "+lower, subjects("User")),
		column("Groups", "string", 1, "Groups in the "+lower, subjects("Group")),
		column("ServiceAccounts", "string", 1, "ServiceAccounts in the "+lower, subjects("ServiceAccount")),
	}
}

func networkPolicyColumns() []Column {
	c := selectorColumn("spec.podSelector", "io.k8s.api.networking.v1.NetworkPolicySpec", "podSelector")
	c.Def.Name, c.Def.Priority = "Pod-Selector", 0
	return []Column{NameColumn, c, ageColumn()}
}

func pdbColumns() []Column {
	orNA := func(path string) func(map[string]any, time.Time) any {
		return func(obj map[string]any, _ time.Time) any {
			v, ok := ValueAt(obj, path)
			if !ok {
				return "N/A"
			}
			return fmt.Sprint(v)
		}
	}
	return []Column{
		NameColumn,
		column("Min Available", "string", 0, "The minimum number of pods that must be available.", orNA(".spec.minAvailable")),
		column("Max Unavailable", "string", 0, "The maximum number of pods that may be unavailable.", orNA(".spec.maxUnavailable")),
		column("Allowed Disruptions", "integer", 0, "Calculated number of pods that may be disrupted at this time.", intCell("status.disruptionsAllowed")),
		ageColumn(),
	}
}

func webhookColumns() []Column {
	return []Column{NameColumn, column("Webhooks", "integer", 0, "Webhooks indicates the number of webhooks registered in this configuration", countCell("webhooks")), ageColumn()}
}

// namespaceColumns are a Namespace's.
func namespaceColumns() []Column {
	return []Column{NameColumn, column("Status", "string", 0, "The status of the namespace", stringCell("status.phase")), ageColumn()}
}

// leaseColumns are a Lease's.
func leaseColumns() []Column {
	return []Column{NameColumn, docColumn("Holder", "string", 0, "io.k8s.api.coordination.v1.LeaseSpec", "holderIdentity", stringCell("spec.holderIdentity")), ageColumn()}
}

// eventColumns are a v1 Event's, which kube-apiserver also shows for an events.k8s.io Event
// (its printers print the internal Event both are): at is where each field is in the object
// shown.
func eventColumns(at eventFields) []Column {
	ev := coreV1 + "Event"
	first := func(obj map[string]any, now time.Time) string {
		if ts := stringAt(obj, at.firstTimestamp); ts != "" {
			return Age(ts, now)
		}
		return Age(stringAt(obj, "eventTime"), now)
	}
	return []Column{
		docColumn("Last Seen", "string", 0, ev, "lastTimestamp", func(obj map[string]any, now time.Time) any {
			if ts := stringAt(obj, "series.lastObservedTime"); ts != "" {
				return Age(ts, now)
			}
			if ts := stringAt(obj, at.lastTimestamp); ts != "" {
				return Age(ts, now)
			}
			return first(obj, now)
		}),
		docColumn("Type", "string", 0, ev, "type", stringCell("type")),
		docColumn("Reason", "string", 0, ev, "reason", stringCell("reason")),
		docColumn("Object", "string", 0, ev, "involvedObject", func(obj map[string]any, _ time.Time) any {
			kind := strings.ToLower(stringAt(obj, at.involved+".kind"))
			if name := stringAt(obj, at.involved+".name"); name != "" {
				return kind + "/" + name
			}
			return kind
		}),
		docColumn("Subobject", "string", 1, coreV1+"ObjectReference", "fieldPath", stringCell(at.involved+".fieldPath")),
		docColumn("Source", "string", 1, ev, "source", func(obj map[string]any, _ time.Time) any {
			component := cmp.Or(stringAt(obj, at.sourceComponent), stringAt(obj, at.reportingController))
			if instance := cmp.Or(stringAt(obj, at.sourceHost), stringAt(obj, "reportingInstance")); instance != "" {
				return component + ", " + instance
			}
			return component
		}),
		docColumn("Message", "string", 0, ev, "message", func(obj map[string]any, _ time.Time) any { return strings.TrimSpace(stringAt(obj, at.message)) }),
		docColumn("First Seen", "string", 1, ev, "firstTimestamp", func(obj map[string]any, now time.Time) any { return first(obj, now) }),
		docColumn("Count", "string", 1, ev, "count", func(obj map[string]any, _ time.Time) any {
			if _, ok := ValueAt(obj, "series"); ok {
				return intAt(obj, "series.count")
			}
			return max(intAt(obj, at.count), 1) // a singleton event of the new API has none
		}),
		{Def: metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Priority: 1}, Doc: NameColumn.Doc, Cell: NameColumn.Cell},
	}
}

// eventFields says where an Event's fields are: in a v1 Event (coreEventFields) or an
// events.k8s.io one (eventsV1Fields).
type eventFields struct {
	firstTimestamp, lastTimestamp, involved, sourceComponent, sourceHost, reportingController, message, count string
}

var (
	coreEventFields = eventFields{firstTimestamp: "firstTimestamp", lastTimestamp: "lastTimestamp", involved: "involvedObject",
		sourceComponent: "source.component", sourceHost: "source.host", reportingController: "reportingComponent", message: "message", count: "count"}
	eventsV1Fields = eventFields{firstTimestamp: "deprecatedFirstTimestamp", lastTimestamp: "deprecatedLastTimestamp", involved: "regarding",
		sourceComponent: "deprecatedSource.component", sourceHost: "deprecatedSource.host", reportingController: "reportingController", message: "note", count: "deprecatedCount"}
)

// nodeColumns are kubectl's for Nodes: Ready or NotReady (Unknown without the condition, with
// SchedulingDisabled when cordoned), the roles from node-role.kubernetes.io/<role> labels, the
// kubelet's version, and with -o wide the addresses and what the kubelet reports of its host.
func nodeColumns() []Column {
	info := func(name, key string) Column {
		return docColumn(name, "string", 1, coreV1+"NodeSystemInfo", key, func(obj map[string]any, _ time.Time) any {
			v := stringAt(obj, "status.nodeInfo."+key)
			if v == "" {
				v = "<unknown>"
			}
			if arch := stringAt(obj, "status.nodeInfo.architecture"); key == "kernelVersion" && arch != "" {
				v += " (" + arch + ")"
			}
			return v
		})
	}
	address := func(name, typ string) Column {
		return docColumn(name, "string", 1, coreV1+"NodeStatus", "addresses", func(obj map[string]any, _ time.Time) any {
			for _, a := range listAt(obj, "status.addresses") {
				if m, _ := a.(map[string]any); m["type"] == typ {
					return stringAt(m, "address")
				}
			}
			return none
		})
	}
	return []Column{
		NameColumn,
		column("Status", "string", 0, "The status of the node", func(obj map[string]any, _ time.Time) any {
			status := "Unknown"
			for _, c := range listAt(obj, "status.conditions") {
				if m, _ := c.(map[string]any); m["type"] == "Ready" {
					status = "NotReady"
					if m["status"] == "True" {
						status = "Ready"
					}
				}
			}
			if v, _ := ValueAt(obj, "spec.unschedulable"); v == true {
				status += ",SchedulingDisabled"
			}
			return status
		}),
		column("Roles", "string", 0, "The roles of the node", func(obj map[string]any, _ time.Time) any {
			roles := sets.New[string]()
			for k, v := range mapAt(obj, "metadata.labels") {
				if role, ok := strings.CutPrefix(k, "node-role.kubernetes.io/"); ok && role != "" {
					roles.Insert(role)
				} else if s, _ := v.(string); k == "kubernetes.io/role" && s != "" {
					roles.Insert(s)
				}
			}
			if roles.Len() == 0 {
				return none
			}
			return strings.Join(sets.List(roles), ",")
		}),
		ageColumn(),
		docColumn("Version", "string", 0, coreV1+"NodeSystemInfo", "kubeletVersion", stringCell("status.nodeInfo.kubeletVersion")),
		address("Internal-IP", "InternalIP"),
		address("External-IP", "ExternalIP"),
		info("OS-Image", "osImage"),
		info("Kernel-Version", "kernelVersion"),
		info("Container-Runtime", "containerRuntimeVersion"),
	}
}

// endpointSliceColumns are kubectl's for EndpointSlices: the first three ports and addresses
// ("+ N more..." beyond), <unset> when there are none.
func endpointSliceColumns() []Column {
	const endpointSlice = "io.k8s.api.discovery.v1.EndpointSlice" // (the printers' descriptions are v1beta1's)
	firstThree := func(list []string) string {
		switch {
		case len(list) == 0:
			return "<unset>"
		case len(list) > 3:
			return fmt.Sprintf("%s + %d more...", strings.Join(list[:3], ","), len(list)-3)
		}
		return strings.Join(list, ",")
	}
	return []Column{
		NameColumn,
		docColumn("AddressType", "string", 0, endpointSlice, "addressType", stringCell("addressType")),
		docColumn("Ports", "string", 0, endpointSlice, "ports", func(obj map[string]any, _ time.Time) any {
			var out []string
			for _, p := range listAt(obj, "ports") {
				m, _ := p.(map[string]any)
				switch {
				case m["port"] != nil:
					out = append(out, strconv.FormatInt(intAt(m, "port"), 10))
				case m["name"] != nil:
					out = append(out, stringAt(m, "name"))
				default:
					out = append(out, "*")
				}
			}
			return firstThree(out)
		}),
		docColumn("Endpoints", "string", 0, endpointSlice, "endpoints", func(obj map[string]any, _ time.Time) any {
			var out []string
			for _, e := range listAt(obj, "endpoints") {
				m, _ := e.(map[string]any)
				for _, a := range listAt(m, "addresses") {
					s, _ := a.(string)
					out = append(out, s)
				}
			}
			return firstThree(out)
		}),
		ageColumn(),
	}
}
