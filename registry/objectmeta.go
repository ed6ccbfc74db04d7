package registry

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// objectMetaOf decodes a JSON object's metadata into ObjectMeta, as Kubernetes does before
// validating it: through a JSON round trip, which also gives its errors, unless the common
// shape is read directly (simpleObjectMeta, objectmeta_fast.go).
func objectMetaOf(md map[string]any) (metav1.ObjectMeta, error) {
	if meta, ok := simpleObjectMeta(md); ok {
		return meta, nil
	}
	var meta metav1.ObjectMeta
	raw, err := json.Marshal(md)
	if err != nil {
		return meta, err
	}
	err = json.Unmarshal(raw, &meta)
	return meta, err
}

// finalizerWarnings are the warnings kube-apiserver gives a write of a custom resource (of its
// main resource: obj, the stored object old or nil) for each finalizer it adds without a
// domain-qualified name with a path, but for the standard ones (orphan, foregroundDeletion,
// kubernetes). apiextensions-apiserver's own function is unexported, and its package brings
// kube-apiserver's storage along: this is its rule, over apimachinery's IsQualifiedName.
func finalizerWarnings(t Target, obj, old map[string]any) []string {
	if t.Kind.BuiltIn() || t.Sub != "" {
		return nil
	}
	added := stringSlice(metadataOf(obj)["finalizers"])
	if len(added) == 0 {
		return nil
	}
	if old != nil {
		had := stringSlice(metadataOf(old)["finalizers"])
		added = slices.DeleteFunc(slices.Clone(added), func(f string) bool { return slices.Contains(had, f) })
	}
	slices.Sort(added)
	added = slices.Compact(added)
	const path = "metadata.finalizers"
	var warnings []string
	for _, f := range added {
		for _, msg := range validation.IsQualifiedName(f) {
			warnings = append(warnings, fmt.Sprintf("%s: %q: %s", path, f, msg))
		}
		if strings.Contains(f, "/") {
			continue
		}
		switch f {
		case metav1.FinalizerOrphanDependents, metav1.FinalizerDeleteDependents, string(corev1.FinalizerKubernetes):
		default:
			if strings.Contains(f, ".") {
				warnings = append(warnings, fmt.Sprintf("%s: %q: prefer a domain-qualified finalizer name including a path (/) to avoid accidental conflicts with other finalizer writers", path, f))
			} else {
				warnings = append(warnings, fmt.Sprintf("%s: %q: prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers", path, f))
			}
		}
	}
	return warnings
}
