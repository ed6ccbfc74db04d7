package rbac

import (
	_ "embed"
	"encoding/json"
)

// bootstrapJSON is the cluster-wide policy kube-apiserver v1.37.2 creates at start
// (its rbac/bootstrap-roles post-start hook): every ClusterRole and ClusterRoleBinding of a fresh
// cluster, recorded from the oracle (kubectl get clusterroles,clusterrolebindings -o json, with
// uid, resourceVersion, creationTimestamp and managedFields dropped). Among them cluster-admin,
// admin, edit and view (aggregated), system:masters' binding, and system:discovery,
// system:basic-user and system:public-info-viewer bound to authenticated (and, for the last,
// unauthenticated) users.
//
//go:embed bootstrap.json
var bootstrapJSON []byte

// Bootstrap returns the bootstrap policy as decoded objects, new on every call, for the store to
// create at start when RBAC is on (registry.Store.Bootstrap keeps what exists, as
// kube-apiserver keeps a policy an administrator changed).
func Bootstrap() []any {
	var objs []map[string]any
	if err := json.Unmarshal(bootstrapJSON, &objs); err != nil {
		panic("rbac: bootstrap.json: " + err.Error()) // embedded, checked by the tests
	}
	out := make([]any, len(objs))
	for i, o := range objs {
		out[i] = o
	}
	return out
}
