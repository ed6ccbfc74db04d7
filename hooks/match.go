package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/webhooks"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Which requests a webhook judges, as kube-apiserver decides it: its rules (operations, API
// groups and versions, resources with subresources, scope) under its matchPolicy, then its
// objectSelector and namespaceSelector.

// matches reports whether the webhook judges req.
func (w *webhook) matches(req *webhooks.Request) bool {
	if exempt(req) {
		return false
	}
	if _, _, ok := w.matchResource(req); !ok {
		return false
	}
	return w.objectMatches(req) && w.namespaceMatches(req)
}

// exempt says which writes no webhook sees: the webhook configurations themselves (as in
// kube-apiserver, so a broken webhook can always be fixed or removed), and opemu's own Events
// and leader Lease (its record of what happened and its leadership must not hang on a webhook).
func exempt(req *webhooks.Request) bool {
	g, r := req.Resource.Group, req.Resource.Resource
	if g == ValidatingResource.Group && (r == ValidatingResource.Resource || r == MutatingResource.Resource) {
		return true
	}
	return req.Internal && (g == "" && r == "events" || g == "coordination.k8s.io" && r == "leases")
}

// matchResource returns the kind and resource the webhook is sent req as: req's own when a rule
// names its version, or under matchPolicy Equivalent another served version of the same
// resource that a rule names (a CRD's other versions, views of the stored one, count; a
// built-in view such as events.k8s.io's Event is another resource to kube-apiserver).
func (w *webhook) matchResource(req *webhooks.Request) (metav1.GroupVersionKind, metav1.GroupVersionResource, bool) {
	if w.ruleMatches(req, req.Resource.Version) {
		return req.Kind, req.Resource, true
	}
	if w.exact || !w.ruleMatches(req, "") {
		return metav1.GroupVersionKind{}, metav1.GroupVersionResource{}, false
	}
	for _, k := range w.a.cfg.Kinds.All() {
		if k.Group != req.Resource.Group || k.Plural != req.Resource.Resource || k.Version == req.Resource.Version || (k.Conversion != nil && k.BuiltIn()) {
			continue
		}
		if w.ruleMatches(req, k.Version) {
			return metav1.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind},
				metav1.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Plural}, true
		}
	}
	return metav1.GroupVersionKind{}, metav1.GroupVersionResource{}, false
}

// ruleMatches reports whether a rule matches req at version ("" matches any version).
func (w *webhook) ruleMatches(req *webhooks.Request, version string) bool {
	for _, r := range w.rules {
		if ruleMatches(r, req, version) {
			return true
		}
	}
	return false
}

func ruleMatches(r admissionregistrationv1.RuleWithOperations, req *webhooks.Request, version string) bool {
	return matchesOperation(r.Operations, req.Operation) &&
		matchesName(r.APIGroups, req.Resource.Group) &&
		(version == "" || matchesName(r.APIVersions, version)) &&
		matchesResource(r.Resources, req.Resource.Resource, req.SubResource) &&
		matchesScope(r.Scope, req)
}

func matchesOperation(ops []admissionregistrationv1.OperationType, op webhooks.Operation) bool {
	for _, o := range ops {
		if o == admissionregistrationv1.OperationAll || string(o) == string(op) {
			return true
		}
	}
	return false
}

func matchesName(l []string, s string) bool {
	for _, x := range l {
		if x == "*" || x == s {
			return true
		}
	}
	return false
}

// matchesResource: "pods" is the main resource only, "pods/status" one subresource, "pods/*"
// the resource and all its subresources, "*" every main resource, "*/status" that subresource
// of every resource, "*/*" everything.
func matchesResource(l []string, resource, sub string) bool {
	for _, x := range l {
		res, s, _ := strings.Cut(x, "/")
		if (res == "*" || res == resource) && (s == "*" || s == sub) {
			return true
		}
	}
	return false
}

// matchesScope: "Cluster" matches cluster-scoped resources (Namespaces among them),
// "Namespaced" namespaced ones, "*" (the default) both.
func matchesScope(scope *admissionregistrationv1.ScopeType, req *webhooks.Request) bool {
	if scope == nil {
		return true
	}
	switch *scope {
	case admissionregistrationv1.ClusterScope:
		return req.Namespace == ""
	case admissionregistrationv1.NamespacedScope:
		return req.Namespace != ""
	}
	return true
}

// objectMatches applies the objectSelector to the object's labels, or to the old object's
// (either matching is enough, as in kube-apiserver: a DELETE has only the old one).
func (w *webhook) objectMatches(req *webhooks.Request) bool {
	if w.objSel.Empty() {
		return true
	}
	return w.objSel.Matches(labelsOf(req.Object)) || req.OldObject != nil && w.objSel.Matches(labelsOf(req.OldObject))
}

// namespaceMatches applies the namespaceSelector: to the labels of the request's namespace
// for a namespaced resource, to a Namespace's own labels, never to other cluster-scoped ones.
// A namespace that does not exist yet (opemu creates it on the first write into it) has only
// its kubernetes.io/metadata.name label.
func (w *webhook) namespaceMatches(req *webhooks.Request) bool {
	if w.nsSel.Empty() {
		return true
	}
	if req.Namespace == "" {
		if req.Resource.Group == "" && req.Resource.Resource == "namespaces" {
			return w.nsSel.Matches(labelsOf(req.Object)) || req.OldObject != nil && w.nsSel.Matches(labelsOf(req.OldObject))
		}
		return true
	}
	set := labels.Set{"kubernetes.io/metadata.name": req.Namespace}
	ns, err := w.a.cfg.Client.Get(context.Background(), cache.Key{Resource: "namespaces", Name: req.Namespace})
	if err == nil {
		set = ns.Labels()
	}
	return w.nsSel.Matches(set)
}

// labelsOf returns obj's metadata.labels.
func labelsOf(obj map[string]any) labels.Set {
	md, _ := obj["metadata"].(map[string]any)
	m, _ := md["labels"].(map[string]any)
	out := make(labels.Set, len(m))
	for k, v := range m {
		s, _ := v.(string)
		out[k] = s
	}
	return out
}

// The scale subresource: webhooks whose rules name <resource>/scale get autoscaling/v1 Scale
// objects, and a mutating webhook's patch of the Scale sets the object's replicas.

// scaleView is the Scale a review was sent, for patching back.
type scaleView struct {
	kind *kinds.Kind
	obj  map[string]any
}

// scaleOf is the autoscaling/v1 Scale view of obj (nil for nil), as the scale subresource shows it.
func scaleOf(k *kinds.Kind, obj map[string]any) map[string]any {
	if obj == nil {
		return nil
	}
	md, _ := obj["metadata"].(map[string]any)
	smd := map[string]any{}
	for _, f := range []string{"name", "namespace", "uid", "resourceVersion", "creationTimestamp"} {
		if v, ok := md[f]; ok {
			smd[f] = v
		}
	}
	spec, status := map[string]any{}, map[string]any{"replicas": json.Number("0")}
	if v, ok := kinds.ValueAt(obj, k.Scale.SpecReplicasPath); ok {
		spec["replicas"] = v
	}
	if v, ok := kinds.ValueAt(obj, k.Scale.StatusReplicasPath); ok {
		status["replicas"] = v
	}
	return map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": smd, "spec": spec, "status": status}
}

// patchBack turns a patch of the Scale into a patch of the object: the replicas it ends with.
func (v *scaleView) patchBack(ops []webhooks.PatchOperation) ([]webhooks.PatchOperation, error) {
	doc, err := json.Marshal(scaleOf(v.kind, v.obj))
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	p, err := jsonpatch.DecodePatch(raw)
	if err != nil {
		return nil, fmt.Errorf("the patch is not a JSON Patch: %v", err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		return nil, fmt.Errorf("the patch does not apply to the Scale: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	dec.UseNumber()
	var scale map[string]any
	if err := dec.Decode(&scale); err != nil {
		return nil, err
	}
	spec, _ := scale["spec"].(map[string]any)
	replicas, ok := spec["replicas"].(json.Number)
	if !ok {
		return nil, errors.New("the patched Scale has no spec.replicas")
	}
	path := "/" + strings.ReplaceAll(strings.TrimPrefix(v.kind.Scale.SpecReplicasPath, "."), ".", "/")
	return []webhooks.PatchOperation{{Op: "add", Path: path, Value: replicas}}, nil
}
