package snapshot

import (
	"container/heap"
	"sort"
	"strings"
)

// The order of a snapshot's file is the order kubectl apply -f creates its objects in, so that
// each finds what it needs: the CRDs first (their kinds are served by the time their objects
// come), then the namespaces (namespaced objects need theirs), then the rest with owners before
// their dependents where the ownerReferences allow it (a cycle is broken at its first object).
// Among objects that do not depend on each other, kinds go in the order a chart installs them
// (Helm's), and last the ones that change how the next requests are answered: Faults and
// admission webhook configurations, applied before the objects they would judge, could refuse
// them.

// ranks order the kinds of the rest ("group/Kind"); a kind not named ranks defaultRank.
var ranks = map[string]int{
	"/Node":                                 10,
	"/ServiceAccount":                       11,
	"/Secret":                               12,
	"/ConfigMap":                            13,
	"/PersistentVolumeClaim":                14,
	"rbac.authorization.k8s.io/ClusterRole": 15,
	"rbac.authorization.k8s.io/ClusterRoleBinding": 16,
	"rbac.authorization.k8s.io/Role":               17,
	"rbac.authorization.k8s.io/RoleBinding":        18,
	"/Service":                                     19,
	"/Endpoints":                                   20,
	"discovery.k8s.io/EndpointSlice":               21,
	// custom resources and the kinds not named: defaultRank
	"apps/DaemonSet":                   40,
	"/Pod":                             41,
	"apps/ReplicaSet":                  42,
	"apps/Deployment":                  43,
	"apps/StatefulSet":                 44,
	"batch/Job":                        45,
	"batch/CronJob":                    46,
	"networking.k8s.io/Ingress":        47,
	"networking.k8s.io/NetworkPolicy":  48,
	"policy/PodDisruptionBudget":       49,
	"coordination.k8s.io/Lease":        60,
	"/Event":                           61,
	"events.k8s.io/Event":              61,
	"controllers.opemu.dev/Controller": 70,
	"faults.opemu.dev/Fault":           80,
	"admissionregistration.k8s.io/MutatingWebhookConfiguration":   81,
	"admissionregistration.k8s.io/ValidatingWebhookConfiguration": 82,
}

const (
	rankCRD       = 0
	rankNamespace = 1
	defaultRank   = 30
)

// entry is one object being ordered.
type entry struct {
	doc                          map[string]any
	rank                         int
	group, kind, namespace, name string
	uid                          string
	owners                       []string // the uids its ownerReferences name
}

func newEntry(doc map[string]any) entry {
	e := entry{doc: doc}
	av, _ := doc["apiVersion"].(string)
	e.kind, _ = doc["kind"].(string)
	if i := strings.LastIndexByte(av, '/'); i >= 0 {
		e.group = av[:i]
	}
	md, _ := doc["metadata"].(map[string]any)
	e.namespace, _ = md["namespace"].(string)
	e.name, _ = md["name"].(string)
	e.uid = uidOf(md)
	refs, _ := md["ownerReferences"].([]any)
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		if uid, _ := ref["uid"].(string); uid != "" {
			e.owners = append(e.owners, uid)
		}
	}
	switch gk := e.group + "/" + e.kind; {
	case gk == "apiextensions.k8s.io/CustomResourceDefinition":
		e.rank = rankCRD
	case gk == "/Namespace":
		e.rank = rankNamespace
	default:
		e.rank = defaultRank
		if r, ok := ranks[gk]; ok {
			e.rank = r
		}
	}
	return e
}

// uidOf is an object's uid: metadata.uid, else the annotation a snapshot's file carries it in.
func uidOf(md map[string]any) string {
	if uid, _ := md["uid"].(string); uid != "" {
		return uid
	}
	ann, _ := md["annotations"].(map[string]any)
	uid, _ := ann[UIDAnnotation].(string)
	return uid
}

// order returns docs in the order of a snapshot's file (see above).
func order(docs []map[string]any) []map[string]any {
	es := make([]entry, len(docs))
	for i, d := range docs {
		es[i] = newEntry(d)
	}
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		switch {
		case a.rank != b.rank:
			return a.rank < b.rank
		case a.group != b.group:
			return a.group < b.group
		case a.kind != b.kind:
			return a.kind < b.kind
		case a.namespace != b.namespace:
			return a.namespace < b.namespace
		}
		return a.name < b.name
	})
	rest := 0
	for rest < len(es) && es[rest].rank <= rankNamespace {
		rest++
	}
	out := make([]map[string]any, 0, len(es))
	for _, e := range es[:rest] {
		out = append(out, e.doc)
	}
	for _, i := range ownersFirst(es[rest:]) {
		out = append(out, es[rest+i].doc)
	}
	return out
}

// ownersFirst returns the indexes of es (in their order of preference) so that an object
// comes after the owners among es its ownerReferences name, taking at each step the most
// preferred object whose owners have all come; on a cycle, the most preferred one left.
func ownersFirst(es []entry) []int {
	byUID := make(map[string]int, len(es))
	for i, e := range es {
		if _, dup := byUID[e.uid]; e.uid != "" && !dup {
			byUID[e.uid] = i
		}
	}
	waiting := make([]int, len(es)) // owners not yet out
	dependents := make([][]int, len(es))
	for i, e := range es {
		seen := map[int]bool{}
		for _, uid := range e.owners {
			if o, ok := byUID[uid]; ok && o != i && !seen[o] {
				seen[o] = true
				waiting[i]++
				dependents[o] = append(dependents[o], i)
			}
		}
	}
	ready := &indexHeap{}
	for i := range es {
		if waiting[i] == 0 {
			heap.Push(ready, i)
		}
	}
	out := make([]int, 0, len(es))
	done := make([]bool, len(es))
	next := 0 // the first index perhaps not out yet, where a cycle is broken
	for len(out) < len(es) {
		if ready.Len() == 0 {
			for done[next] || waiting[next] == 0 {
				next++
			}
			waiting[next] = 0
			heap.Push(ready, next)
		}
		i := heap.Pop(ready).(int)
		if done[i] {
			continue
		}
		done[i] = true
		out = append(out, i)
		for _, d := range dependents[i] {
			if waiting[d]--; waiting[d] == 0 && !done[d] {
				heap.Push(ready, d)
			}
		}
	}
	return out
}

// indexHeap is a min-heap of indexes.
type indexHeap []int

func (h indexHeap) Len() int           { return len(h) }
func (h indexHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h indexHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *indexHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *indexHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
