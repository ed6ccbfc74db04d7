package kinds

import (
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

// column is a Column computed by f.
func column(name, typ string, priority int32, f func(obj map[string]any, now time.Time) any) Column {
	return Column{Def: metav1.TableColumnDefinition{Name: name, Type: typ, Priority: priority}, Cell: f}
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
	return []Column{column("Containers", "string", 1, each("name")), column("Images", "string", 1, each("image"))}
}

// selectorColumn is the -o wide Selector column of a label selector at keys.
func selectorColumn(path string) Column {
	return column("Selector", "string", 1, func(obj map[string]any, _ time.Time) any {
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

// mapSelectorColumn shows a map of labels (a Service's selector) as a selector.
func mapSelectorColumn(name string, priority int32, path string) Column {
	return column(name, "string", priority, func(obj map[string]any, _ time.Time) any {
		set := labels.Set{}
		for k, v := range mapAt(obj, path) {
			set[k], _ = v.(string)
		}
		if len(set) == 0 {
			return none
		}
		return set.String()
	})
}

// intColumn shows the integer at keys, 0 when absent (as the printers show a Go type's zero).
func intColumn(name string, path string) Column {
	return column(name, "integer", 0, func(obj map[string]any, _ time.Time) any { return intAt(obj, path) })
}

func countColumn(name string, paths ...string) Column {
	return column(name, "integer", 0, func(obj map[string]any, _ time.Time) any {
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
	})
}

func podColumns() []Column {
	return []Column{
		NameColumn,
		column("Ready", "string", 0, func(obj map[string]any, _ time.Time) any {
			ready := 0
			for _, cs := range listAt(obj, "status.containerStatuses") {
				if m, _ := cs.(map[string]any); m["ready"] == true {
					ready++
				}
			}
			return fmt.Sprintf("%d/%d", ready, len(listAt(obj, "spec.containers")))
		}),
		column("Status", "string", 0, podStatus),
		column("Restarts", "string", 0, func(obj map[string]any, _ time.Time) any {
			var n int64
			for _, cs := range listAt(obj, "status.containerStatuses") {
				m, _ := cs.(map[string]any)
				n += intAt(m, "restartCount")
			}
			return strconv.FormatInt(n, 10)
		}),
		AgeColumn("Age"),
		column("IP", "string", 1, func(obj map[string]any, _ time.Time) any { return orNone(stringAt(obj, "status.podIP")) }),
		column("Node", "string", 1, func(obj map[string]any, _ time.Time) any { return orNone(stringAt(obj, "spec.nodeName")) }),
		column("Nominated Node", "string", 1, func(obj map[string]any, _ time.Time) any {
			return orNone(stringAt(obj, "status.nominatedNodeName"))
		}),
		column("Readiness Gates", "string", 1, func(obj map[string]any, _ time.Time) any {
			if n := len(listAt(obj, "spec.readinessGates")); n > 0 {
				return fmt.Sprintf("0/%d", n)
			}
			return none
		}),
	}
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
		column("Ready", "string", 0, func(obj map[string]any, _ time.Time) any {
			return fmt.Sprintf("%d/%d", intAt(obj, "status.readyReplicas"), intAt(obj, "spec.replicas"))
		}),
		intColumn("Up-to-date", "status.updatedReplicas"),
		intColumn("Available", "status.availableReplicas"),
		AgeColumn("Age"),
	}, append(containersColumns("spec.template.spec"), selectorColumn("spec.selector"))...)
}

func replicaSetColumns() []Column {
	return append([]Column{
		NameColumn,
		intColumn("Desired", "spec.replicas"),
		intColumn("Current", "status.replicas"),
		intColumn("Ready", "status.readyReplicas"),
		AgeColumn("Age"),
	}, append(containersColumns("spec.template.spec"), selectorColumn("spec.selector"))...)
}

func statefulSetColumns() []Column {
	return append([]Column{
		NameColumn,
		column("Ready", "string", 0, func(obj map[string]any, _ time.Time) any {
			return fmt.Sprintf("%d/%d", intAt(obj, "status.readyReplicas"), intAt(obj, "spec.replicas"))
		}),
		AgeColumn("Age"),
	}, containersColumns("spec.template.spec")...)
}

func daemonSetColumns() []Column {
	n := func(name, field string) Column { return intColumn(name, "status."+field) }
	return append([]Column{
		NameColumn, n("Desired", "desiredNumberScheduled"), n("Current", "currentNumberScheduled"), n("Ready", "numberReady"),
		n("Up-to-date", "updatedNumberScheduled"), n("Available", "numberAvailable"),
		mapSelectorColumn("Node Selector", 0, "spec.template.spec.nodeSelector"),
		AgeColumn("Age"),
	}, append(containersColumns("spec.template.spec"), selectorColumn("spec.selector"))...)
}

func jobColumns() []Column {
	return append([]Column{
		NameColumn,
		column("Status", "string", 0, jobStatus),
		column("Completions", "string", 0, func(obj map[string]any, _ time.Time) any {
			if _, ok := ValueAt(obj, "spec.completions"); ok {
				return fmt.Sprintf("%d/%d", intAt(obj, "status.succeeded"), intAt(obj, "spec.completions"))
			}
			if p := intAt(obj, "spec.parallelism"); p > 1 {
				return fmt.Sprintf("%d/1 of %d", intAt(obj, "status.succeeded"), p)
			}
			return fmt.Sprintf("%d/1", intAt(obj, "status.succeeded"))
		}),
		column("Duration", "string", 0, func(obj map[string]any, now time.Time) any {
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
		AgeColumn("Age"),
	}, append(containersColumns("spec.template.spec"), selectorColumn("spec.selector"))...)
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
		PathColumn("Schedule", ".spec.schedule", "string", 0),
		column("Timezone", "string", 0, func(obj map[string]any, _ time.Time) any { return orNone(stringAt(obj, "spec.timeZone")) }),
		PathColumn("Suspend", ".spec.suspend", "boolean", 0),
		column("Active", "integer", 0, func(obj map[string]any, _ time.Time) any { return int64(len(listAt(obj, "status.active"))) }),
		column("Last Schedule", "string", 0, func(obj map[string]any, now time.Time) any {
			if s := stringAt(obj, "status.lastScheduleTime"); s != "" {
				return Age(s, now)
			}
			return none
		}),
		AgeColumn("Age"),
	}, append(containersColumns("spec.jobTemplate.spec.template.spec"), selectorColumn("spec.jobTemplate.spec.selector"))...)
}

func serviceColumns() []Column {
	return []Column{
		NameColumn,
		PathColumn("Type", ".spec.type", "string", 0),
		column("Cluster-IP", "string", 0, func(obj map[string]any, _ time.Time) any { return orNone(stringAt(obj, "spec.clusterIP")) }),
		column("External-IP", "string", 0, serviceExternalIP),
		column("Port(s)", "string", 0, func(obj map[string]any, _ time.Time) any {
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
		AgeColumn("Age"),
		mapSelectorColumn("Selector", 1, "spec.selector"),
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
	return []Column{NameColumn, countColumn("Data", "data", "binaryData"), AgeColumn("Age")}
}

func secretColumns() []Column {
	return []Column{NameColumn, PathColumn("Type", ".type", "string", 0), countColumn("Data", "data"), AgeColumn("Age")}
}

func serviceAccountColumns() []Column {
	return []Column{NameColumn, countColumn("Secrets", "secrets"), AgeColumn("Age")}
}

func endpointsColumns() []Column {
	return []Column{
		NameColumn,
		column("Endpoints", "string", 0, func(obj map[string]any, _ time.Time) any {
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
		AgeColumn("Age"),
	}
}

func pvcColumns() []Column {
	return []Column{
		NameColumn,
		PathColumn("Status", ".status.phase", "string", 0),
		PathColumn("Volume", ".spec.volumeName", "string", 0),
		column("Capacity", "string", 0, func(obj map[string]any, _ time.Time) any { return stringAt(obj, "status.capacity.storage") }),
		column("Access Modes", "string", 0, func(obj map[string]any, _ time.Time) any {
			short := map[string]string{"ReadWriteOnce": "RWO", "ReadOnlyMany": "ROX", "ReadWriteMany": "RWX", "ReadWriteOncePod": "RWOP"}
			var out []string
			for _, m := range listAt(obj, "status.accessModes") {
				s, _ := m.(string)
				out = append(out, short[s])
			}
			return strings.Join(out, ",")
		}),
		PathColumn("StorageClass", ".spec.storageClassName", "string", 0),
		AgeColumn("Age"),
	}
}

func ingressColumns() []Column {
	return []Column{
		NameColumn,
		column("Class", "string", 0, func(obj map[string]any, _ time.Time) any { return orNone(stringAt(obj, "spec.ingressClassName")) }),
		column("Hosts", "string", 0, func(obj map[string]any, _ time.Time) any {
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
		column("Address", "string", 0, func(obj map[string]any, _ time.Time) any {
			var out []string
			for _, in := range listAt(obj, "status.loadBalancer.ingress") {
				m, _ := in.(map[string]any)
				out = append(out, stringAt(m, "ip")+stringAt(m, "hostname"))
			}
			return strings.Join(out, ",")
		}),
		column("Ports", "string", 0, func(obj map[string]any, _ time.Time) any {
			if len(listAt(obj, "spec.tls")) > 0 {
				return "80, 443"
			}
			return "80"
		}),
		AgeColumn("Age"),
	}
}

// createdAtColumns are the columns of RBAC roles: kubectl shows the creation time itself.
func createdAtColumns() []Column {
	return []Column{NameColumn, column("Created At", "date", 0, func(obj map[string]any, _ time.Time) any {
		return stringAt(obj, "metadata.creationTimestamp")
	})}
}

func bindingColumns() []Column {
	return []Column{
		NameColumn,
		column("Role", "string", 0, func(obj map[string]any, _ time.Time) any {
			return stringAt(obj, "roleRef.kind") + "/" + stringAt(obj, "roleRef.name")
		}),
		AgeColumn("Age"),
	}
}

func networkPolicyColumns() []Column {
	return []Column{NameColumn, selectorColumnAt("Pod-Selector", 0, "spec.podSelector"), AgeColumn("Age")}
}

// selectorColumnAt is a label selector column that shows an empty selector as <none>.
func selectorColumnAt(name string, priority int32, path string) Column {
	c := selectorColumn(path)
	c.Def.Name, c.Def.Priority = name, priority
	return c
}

func pdbColumns() []Column {
	orNA := func(path string) Column {
		return column(pathName(path), "string", 0, func(obj map[string]any, _ time.Time) any {
			v, ok := ValueAt(obj, path)
			if !ok {
				return "N/A"
			}
			return fmt.Sprint(v)
		})
	}
	return []Column{
		NameColumn, orNA(".spec.minAvailable"), orNA(".spec.maxUnavailable"),
		intColumn("Allowed Disruptions", "status.disruptionsAllowed"), AgeColumn("Age"),
	}
}

func pathName(path string) string {
	switch path {
	case ".spec.minAvailable":
		return "Min Available"
	case ".spec.maxUnavailable":
		return "Max Unavailable"
	}
	return path
}

func webhookColumns() []Column {
	return []Column{NameColumn, countColumn("Webhooks", "webhooks"), AgeColumn("Age")}
}

func namespaceColumns() []Column {
	return []Column{NameColumn, PathColumn("Status", ".status.phase", "string", 0), AgeColumn("Age")}
}

// nodeColumns are kubectl's for Nodes: Ready or NotReady (Unknown without the condition, with
// SchedulingDisabled when cordoned), the roles from node-role.kubernetes.io/<role> labels, the
// kubelet's version, and with -o wide the addresses and what the kubelet reports of its host.
func nodeColumns() []Column {
	info := func(name, key string) Column {
		return column(name, "string", 1, func(obj map[string]any, _ time.Time) any {
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
		return column(name, "string", 1, func(obj map[string]any, _ time.Time) any {
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
		column("Status", "string", 0, func(obj map[string]any, _ time.Time) any {
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
		column("Roles", "string", 0, func(obj map[string]any, _ time.Time) any {
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
		AgeColumn("Age"),
		column("Version", "string", 0, func(obj map[string]any, _ time.Time) any { return stringAt(obj, "status.nodeInfo.kubeletVersion") }),
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
		PathColumn("AddressType", ".addressType", "string", 0),
		column("Ports", "string", 0, func(obj map[string]any, _ time.Time) any {
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
		column("Endpoints", "string", 0, func(obj map[string]any, _ time.Time) any {
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
		AgeColumn("Age"),
	}
}
