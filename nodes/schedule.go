package nodes

import (
	"fmt"
	"slices"
	"strings"

	"github.com/opemu/opemu/cache"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	resourcehelper "k8s.io/component-helpers/resource"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// The reasons kube-scheduler's filter plugins give for a Node that does not fit, as its
// FitError words them.
const (
	reasonUnschedulable = "node(s) were unschedulable"
	reasonTaint         = "node(s) had untolerated taint(s)"
	reasonSelector      = "node(s) didn't match Pod's node affinity/selector"
	reasonTooManyPods   = "Too many pods"
)

// usage is what the Pods bound to a Node request, and the pod IPs they hold.
type usage struct {
	requests corev1.ResourceList
	pods     int64
	ips      [256]bool // the last octet of the Node's pod CIDR in use (0, 1 and 255 never are)
}

// placement is where a Pod was accounted: its Node, its requests and its pod IP's last octet
// (0: none).
type placement struct {
	node     string
	requests corev1.ResourceList
	ip       byte
}

// podRequests is what kube-scheduler's NodeResourcesFit counts for p (component-helpers'
// PodRequests: containers, init containers, overhead), plus one pod.
func podRequests(p *corev1.Pod) corev1.ResourceList {
	return resourcehelper.PodRequests(p, resourcehelper.PodResourcesOptions{})
}

// fits checks p against node, whose bound Pods use u, as kube-scheduler's default filters do in
// their order (NodeUnschedulable, TaintToleration, NodeAffinity, NodeResourcesFit), and returns
// the reasons it does not fit (none: it fits) and whether preemption could help (resources
// only).
func fits(p *corev1.Pod, req corev1.ResourceList, node *corev1.Node, u *usage) (reasons []string, resolvable bool) {
	unschedulable := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	if node.Spec.Unschedulable && !corev1helpers.TolerationsTolerateTaint(klog.Background(), p.Spec.Tolerations, &unschedulable, false) {
		return []string{reasonUnschedulable}, false
	}
	noSchedule := func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}
	if _, untolerated := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, p.Spec.Tolerations, noSchedule, false); untolerated {
		return []string{reasonTaint}, false
	}
	if ok, _ := nodeaffinity.GetRequiredNodeAffinity(p).Match(node); !ok {
		return []string{reasonSelector}, false
	}
	alloc := node.Status.Allocatable
	if limit, ok := alloc[corev1.ResourcePods]; ok && u.pods+1 > limit.Value() {
		reasons = append(reasons, reasonTooManyPods)
	}
	names := make([]corev1.ResourceName, 0, len(req))
	for name := range req {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		q := req[name]
		if q.IsZero() || name == corev1.ResourcePods {
			continue
		}
		have, ok := alloc[name]
		if !ok {
			have = *resource.NewQuantity(0, resource.DecimalSI)
		}
		used := u.requests[name]
		used.Add(q)
		if used.Cmp(have) > 0 {
			reasons = append(reasons, "Insufficient "+string(name))
		}
	}
	return reasons, true
}

// unschedulableMessage is kube-scheduler's message for a Pod no Node fits (FitError, then the
// default preemption's): the reasons counted over the Nodes, sorted.
func unschedulableMessage(total int, reasons map[string]int, resolvable bool) string {
	out := make([]string, 0, len(reasons))
	for r, n := range reasons {
		out = append(out, fmt.Sprintf("%d %s", n, r))
	}
	slices.Sort(out)
	msg := fmt.Sprintf("0/%d nodes are available:", total)
	if len(out) > 0 {
		msg += " " + strings.Join(out, ", ") + "."
	}
	preemption := fmt.Sprintf("%d Preemption is not helpful for scheduling", total)
	if resolvable {
		preemption = fmt.Sprintf("%d No preemption victims found for incoming pod", total)
	}
	return msg + fmt.Sprintf(" preemption: 0/%d nodes are available: %s.", total, preemption)
}

// podKey is the key of a Pod.
func podKey(namespace, name string) cache.Key {
	return cache.Key{Resource: "pods", Namespace: namespace, Name: name}
}
