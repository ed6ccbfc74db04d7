package crd

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The replicas paths of a scale subresource are checked on every write as kube-apiserver's
// custom resource validator checks them (pkg/registry/customresource/validator.go's
// ValidateScaleSpec and ValidateScaleStatus, unexported there): a value that is not an integer
// (unstructured's accessor error), negative, or over MaxInt32. The field paths are the
// subresource's JSON paths as written, leading dot included, as kube-apiserver names them.

// validateScaleSpec checks the spec replicas path of u (numbers as kube decodes them).
func validateScaleSpec(u map[string]any, scale *apiextv1.CustomResourceSubresourceScale) field.ErrorList {
	if scale == nil {
		return nil
	}
	return validateReplicas(u, scale.SpecReplicasPath)
}

// validateScaleStatus checks the status replicas path and the label selector path of u.
func validateScaleStatus(u map[string]any, scale *apiextv1.CustomResourceSubresourceScale) field.ErrorList {
	if scale == nil {
		return nil
	}
	errs := validateReplicas(u, scale.StatusReplicasPath)
	if scale.LabelSelectorPath != nil {
		path := strings.TrimPrefix(*scale.LabelSelectorPath, ".")
		selector, _, err := unstructured.NestedString(u, strings.Split(path, ".")...)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath(*scale.LabelSelectorPath), selector, err.Error()))
		}
	}
	return errs
}

func validateReplicas(u map[string]any, jsonPath string) field.ErrorList {
	path := strings.TrimPrefix(jsonPath, ".")
	replicas, _, err := unstructured.NestedInt64(u, strings.Split(path, ".")...)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(field.NewPath(jsonPath), replicas, err.Error())}
	case replicas < 0:
		return field.ErrorList{field.Invalid(field.NewPath(jsonPath), replicas, "should be a non-negative integer")}
	case replicas > math.MaxInt32:
		return field.ErrorList{field.Invalid(field.NewPath(jsonPath), replicas, fmt.Sprintf("should be less than or equal to %v", math.MaxInt32))}
	}
	return nil
}

// scalePaths are a scale subresource's paths split at their dots, for quicklyScaled.
type scalePaths struct{ spec, status, selector []string }

func splitScale(scale *apiextv1.CustomResourceSubresourceScale) *scalePaths {
	if scale == nil {
		return nil
	}
	split := func(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }
	out := &scalePaths{spec: split(scale.SpecReplicasPath), status: split(scale.StatusReplicasPath)}
	if scale.LabelSelectorPath != nil {
		out.selector = split(*scale.LabelSelectorPath)
	}
	return out
}

// quicklyScaled reports whether obj's scale paths certainly pass validateScaleSpec and
// validateScaleStatus: each replicas value missing or a plain integer in range, the selector
// missing or a string, every object on the way an object. false means they may not.
func (s *schema) quicklyScaled(obj map[string]any) bool {
	p := s.scalePaths
	if p == nil {
		return true
	}
	if !quickAt(obj, p.spec, quickReplicas) || !quickAt(obj, p.status, quickReplicas) {
		return false
	}
	return p.selector == nil || quickAt(obj, p.selector, quickSelector)
}

func quickReplicas(v any) bool {
	n, ok := v.(json.Number)
	if !ok {
		return v == nil
	}
	i, ok := integer(n)
	return ok && i >= 0 && i <= math.MaxInt32
}

func quickSelector(v any) bool {
	_, ok := v.(string)
	return ok || v == nil
}

// quickAt reports whether the value at path in obj passes ok: a missing value is given to ok as
// nil; a null, or a path through something other than an object, is not vouched for.
func quickAt(obj map[string]any, path []string, ok func(any) bool) bool {
	cur := obj
	for i, p := range path {
		v, found := cur[p]
		if !found {
			return ok(nil)
		}
		if i == len(path)-1 {
			return v != nil && ok(v)
		}
		if cur, found = v.(map[string]any); !found {
			return false
		}
	}
	return false
}
