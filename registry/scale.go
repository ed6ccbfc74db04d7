package registry

import (
	"encoding/json"
	"math"

	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// scaleOf is the autoscaling/v1 Scale view of obj.
func scaleOf(t Target, obj map[string]any) map[string]any {
	md := metadataOf(obj)
	smd := map[string]any{}
	for _, k := range []string{"name", "namespace", "uid", "resourceVersion", "creationTimestamp"} {
		if v, ok := md[k]; ok {
			smd[k] = v
		}
	}
	spec := map[string]any{}
	if v, ok := kinds.ValueAt(obj, t.Kind.Scale.SpecReplicasPath); ok {
		spec["replicas"] = v
	}
	status := map[string]any{"replicas": json.Number("0")}
	if v, ok := kinds.ValueAt(obj, t.Kind.Scale.StatusReplicasPath); ok {
		status["replicas"] = v
	}
	if t.Kind.Scale.LabelSelectorPath != nil {
		if v, ok := kinds.ValueAt(obj, *t.Kind.Scale.LabelSelectorPath); ok {
			status["selector"] = selectorString(v)
		}
	}
	return map[string]any{"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": smd, "spec": spec, "status": status}
}

// selectorString is a Scale's status.selector: the string at a custom resource's
// labelSelectorPath as it is, a built-in workload's spec.selector (a LabelSelector) in its
// string form, as kube-apiserver gives it.
func selectorString(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return ""
	}
	var ls metav1.LabelSelector
	if err := json.Unmarshal(raw, &ls); err != nil {
		return ""
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return ""
	}
	return sel.String()
}

// fromScale returns cur with the replicas of the Scale object scale, and the Scale's
// resourceVersion, when it has one, as the update's precondition.
func fromScale(t Target, cur, scale map[string]any) (map[string]any, error) {
	if av, kind := stringOf(scale["apiVersion"]), stringOf(scale["kind"]); kind != "Scale" || av != "autoscaling/v1" {
		return nil, badRequest("expected an autoscaling/v1 Scale, got %s %s", av, kind)
	}
	smd, _ := scale["metadata"].(map[string]any)
	if name := stringOf(smd["name"]); name != "" && name != t.Key.Name {
		return nil, badRequest("the name of the object (%s) does not match the name on the URL (%s)", name, t.Key.Name)
	}
	spec, _ := scale["spec"].(map[string]any)
	n, ok := spec["replicas"].(json.Number)
	path := field.NewPath("spec", "replicas")
	invalid := func(detail string) error {
		return apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, t.Key.Name,
			field.ErrorList{field.Invalid(path, spec["replicas"], detail)})
	}
	if !ok {
		return nil, invalid("must be an integer")
	}
	v, err := n.Int64()
	if err != nil || v > math.MaxInt32 {
		return nil, invalid("must be an integer")
	}
	if v < 0 {
		return nil, invalid("must be greater than or equal to 0")
	}
	next := deepCopy(cur)
	setPath(next, jsonPath(t.Kind.Scale.SpecReplicasPath), json.Number(n.String()))
	if rv := stringOf(smd["resourceVersion"]); rv != "" {
		metadataOf(next)["resourceVersion"] = rv
	}
	return next, nil
}
