package server

import (
	"github.com/opemu/opemu/crd"
)

// builtinKinds are the built-in resources served beside custom resources (SPEC §3). They have
// no schema: the write path checks their metadata only.
var builtinKinds = map[[3]string]*crd.Kind{
	{"", "v1", "events"}:                    {Version: "v1", Kind: "Event", ListKind: "EventList", Plural: "events", Singular: "event", ShortNames: []string{"ev"}, Namespaced: true, StorageVersion: "v1"},
	{"", "v1", "namespaces"}:                {Version: "v1", Kind: "Namespace", ListKind: "NamespaceList", Plural: "namespaces", Singular: "namespace", ShortNames: []string{"ns"}, StorageVersion: "v1"},
	{"coordination.k8s.io", "v1", "leases"}: {Group: "coordination.k8s.io", Version: "v1", Kind: "Lease", ListKind: "LeaseList", Plural: "leases", Singular: "lease", Namespaced: true, StorageVersion: "v1"},
}

// lookupKind finds a built-in or custom resource kind.
func (s *Server) lookupKind(group, version, plural string) (*crd.Kind, bool) {
	if k, ok := builtinKinds[[3]string{group, version, plural}]; ok {
		return k, true
	}
	return s.cfg.CRDs.Lookup(group, version, plural)
}

// isBuiltin reports whether k is one of builtinKinds.
func isBuiltin(k *crd.Kind) bool {
	return builtinKinds[[3]string{k.Group, k.Version, k.Plural}] == k
}

// defaultBuiltin fills what the kube-apiserver's strategies fill for built-in kinds.
func defaultBuiltin(k *crd.Kind, obj map[string]any) {
	if k.Kind != "Namespace" {
		return
	}
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
	md := metadataOf(obj)
	labels, ok := md["labels"].(map[string]any)
	if !ok {
		labels = map[string]any{}
		md["labels"] = labels
	}
	if name, _ := md["name"].(string); name != "" {
		labels["kubernetes.io/metadata.name"] = name
	}
}
