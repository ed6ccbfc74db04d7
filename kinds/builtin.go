package kinds

import (
	"github.com/opemu/opemu/cache"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

// The built-in kinds served beside custom resources since the start (SPEC §3) that are kept as
// sent (v1 Events carry opemu's severity): no pruning or defaults, kube-apiserver's validation
// rules only (builtin_rules.go). The kinds of SPEC §14, and Namespace, are in served.go; the rules
// of Namespaces their Go type cannot say are here.

// Namespaces, Events and Leases are where the built-in kinds are stored.
var (
	Namespaces = cache.GroupResource{Resource: "namespaces"}
	Events     = EventKind().GroupResource()
	Leases     = LeaseKind().GroupResource()
)

// Builtins returns new copies of the built-in kinds: Event and Lease, and the kinds of
// served.go (the CustomResourceDefinition kind comes from package crd, which owns its rules).
func Builtins() []*Kind {
	return append([]*Kind{EventKind(), LeaseKind()}, typedKinds(newTypeSet())...)
}

// The finalizer kube-apiserver gives every Namespace (spec.finalizers): the namespace
// controller removes it once the namespace is empty.
const NamespaceFinalizer = string(corev1.FinalizerKubernetes)

// labelNamespace sets the kubernetes.io/metadata.name label to the Namespace's name, as
// kube-apiserver's namespace strategy does in Canonicalize (so a generated name gets it too).
func labelNamespace(obj map[string]any) {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	name, _ := md["name"].(string)
	if name == "" {
		return
	}
	labels, ok := md["labels"].(map[string]any)
	if !ok {
		labels = map[string]any{}
		md["labels"] = labels
	}
	labels[corev1.LabelMetadataName] = name
}

// objectAt returns the object at key in obj, made (empty) when absent; ok is false when
// something else is there, which validation refuses.
func objectAt(obj map[string]any, key string) (m map[string]any, ok bool) {
	switch v := obj[key].(type) {
	case map[string]any:
		return v, true
	case nil:
		m = map[string]any{}
		obj[key] = m
		return m, true
	}
	return nil, false
}

// prepareNamespace is kube-apiserver's namespace strategy's PrepareForCreate: the status is
// phase Active, whatever was sent, and spec.finalizers holds the kubernetes finalizer (added
// to those sent).
func prepareNamespace(obj map[string]any) {
	obj["status"] = map[string]any{"phase": string(corev1.NamespaceActive)}
	spec, ok := objectAt(obj, "spec")
	if !ok {
		return
	}
	finalizers, _ := spec["finalizers"].([]any)
	for _, f := range finalizers {
		if f == NamespaceFinalizer {
			return
		}
	}
	spec["finalizers"] = append(finalizers, NamespaceFinalizer)
}

// keepNamespaceFinalizers is the namespace strategy's PrepareForUpdate for the main resource:
// spec.finalizers change only through /finalize (the status, only through /status, is kept by
// the status subresource's rule).
func keepNamespaceFinalizers(obj, old map[string]any) {
	oldSpec, _ := old["spec"].(map[string]any)
	f, had := oldSpec["finalizers"]
	spec, ok := obj["spec"].(map[string]any)
	if !ok {
		if !had {
			return
		}
		spec = map[string]any{}
		obj["spec"] = spec
	}
	if had {
		spec["finalizers"] = f
	} else {
		delete(spec, "finalizers")
	}
}

// EventKind is core/v1 Event, with the field selectors kube-apiserver offers for it plus
// lastTimestamp, severity, count, series.lastObservedTime and eventTime for opemu's own
// queries and expiry.
func EventKind() *Kind {
	return &Kind{
		Version: "v1", Kind: "Event", ListKind: "EventList", Plural: "events", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true,
		Columns: eventColumns(coreEventFields),
		Fields: []Field{
			{Name: "involvedObject.kind"}, {Name: "involvedObject.namespace"}, {Name: "involvedObject.name"},
			{Name: "involvedObject.uid"}, {Name: "involvedObject.apiVersion"}, {Name: "involvedObject.resourceVersion"},
			{Name: "involvedObject.fieldPath"}, {Name: "reason"}, {Name: "reportingComponent"},
			{Name: "source", Path: "source.component"}, {Name: "type"},
			{Name: "severity"}, {Name: "lastTimestamp"}, {Name: "count"},
			// When an Event written through events.k8s.io (no lastTimestamp) was last seen.
			{Name: "series.lastObservedTime"}, {Name: "eventTime"},
		},
		StrategicPatch:      &corev1.Event{},
		Protobuf:            true,
		NameRule:            NameIsPathSegment,
		AllowCreateOnUpdate: true,
		Canonicalize:        eventShape,
		Schema:              rulesOnly[corev1.Event]{check: validateCoreEvent},
		ManagedTypes:        smdSchema{}.converter(),
		ManagedExtensions:   []string{"severity"},
	}
}

// eventShape gives a v1 Event the fields its Go type always encodes (times as null, the
// reporting strings as ""), as kube-apiserver stores every Event in that shape.
func eventShape(obj map[string]any) {
	for _, k := range []string{"eventTime", "firstTimestamp", "lastTimestamp"} {
		if _, ok := obj[k]; !ok {
			obj[k] = nil
		}
	}
	for _, k := range []string{"reportingComponent", "reportingInstance"} {
		if _, ok := obj[k]; !ok {
			obj[k] = ""
		}
	}
}

// LeaseKind is coordination.k8s.io/v1 Lease.
func LeaseKind() *Kind {
	return &Kind{
		Group: "coordination.k8s.io", Version: "v1", Kind: "Lease", ListKind: "LeaseList", Plural: "leases", Singular: "lease", Namespaced: true,
		Columns:             leaseColumns(),
		StrategicPatch:      &coordinationv1.Lease{},
		Protobuf:            true,
		AllowCreateOnUpdate: true,
		Schema:              rulesOnly[coordinationv1.Lease]{check: validateLease},
		TypeConverter:       smdSchema{}.converter(),
	}
}
