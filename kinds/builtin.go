package kinds

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
)

// The built-in kinds served beside custom resources since the start (SPEC §3). They have no
// schema: the write path checks their metadata only, and keeps the rest as sent (v1 Events
// carry opemu's severity). The kinds of SPEC §14 are in served.go.

// Namespaces, Events and Leases are where the built-in kinds are stored.
var (
	Namespaces = NamespaceKind().GroupResource()
	Events     = EventKind().GroupResource()
	Leases     = LeaseKind().GroupResource()
)

// Builtins returns new copies of the built-in kinds: Namespace, Event and Lease, and the kinds
// of served.go (the CustomResourceDefinition kind comes from package crd, which owns its
// rules).
func Builtins() []*Kind {
	return append([]*Kind{NamespaceKind(), EventKind(), LeaseKind()}, typedKinds(newTypeSet())...)
}

// NamespaceKind is core/v1 Namespace.
func NamespaceKind() *Kind {
	return &Kind{
		Version: "v1", Kind: "Namespace", ListKind: "NamespaceList", Plural: "namespaces", Singular: "namespace", ShortNames: []string{"ns"},
		Columns:          namespaceColumns(),
		Fields:           []Field{{Name: "status.phase"}},
		StrategicPatch:   &corev1.Namespace{},
		Protobuf:         true,
		PrepareForCreate: defaultNamespace,
		Canonicalize:     labelNamespace,
	}
}

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
	labels["kubernetes.io/metadata.name"] = name
}

// defaultNamespace fills what kube-apiserver's namespace strategy fills: the kubernetes
// finalizer, phase Active and the kubernetes.io/metadata.name label.
func defaultNamespace(obj map[string]any) {
	if _, ok := obj["spec"].(map[string]any); !ok {
		obj["spec"] = map[string]any{"finalizers": []any{"kubernetes"}}
	}
	st, ok := obj["status"].(map[string]any)
	if !ok {
		st = map[string]any{}
		obj["status"] = st
	}
	if st["phase"] == nil {
		st["phase"] = "Active"
	}
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		return
	}
	labels, ok := md["labels"].(map[string]any)
	if !ok {
		labels = map[string]any{}
		md["labels"] = labels
	}
	if name, _ := md["name"].(string); name != "" {
		labels["kubernetes.io/metadata.name"] = name
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
		StrategicPatch: &corev1.Event{},
		Protobuf:       true,
	}
}

// LeaseKind is coordination.k8s.io/v1 Lease.
func LeaseKind() *Kind {
	return &Kind{
		Group: "coordination.k8s.io", Version: "v1", Kind: "Lease", ListKind: "LeaseList", Plural: "leases", Singular: "lease", Namespaced: true,
		Columns:        leaseColumns(),
		StrategicPatch: &coordinationv1.Lease{},
		Protobuf:       true,
	}
}
