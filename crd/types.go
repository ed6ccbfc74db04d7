package crd

import (
	"fmt"
	"sync"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
	smdtyped "sigs.k8s.io/structured-merge-diff/v6/typed"
)

// The structured-merge-diff types of a CRD's custom resources, as kube-apiserver's custom
// resource handler makes them (its buildOpenAPIModelsForApply): each version's OpenAPI v3
// document built by apiextensions-apiserver's builder from the CRD's structural schema, merged,
// and turned into a TypeConverter by apimachinery's managedfields. Server-side apply and the
// ownership of every write then follow the schema: list-type map and set lists merge by their
// keys and values, x-kubernetes-map-type atomic maps are one field, preserve-unknown-fields
// and embedded resources are typed as kube types them, and a field the schema does not
// declare is an error of the field manager's (kube-apiserver's 500 on an apply).

// types is the TypeConverter of one CRD's objects, of every version, built on the first write
// that needs it: a CRD that is never written to costs nothing, and neither does start-up.
// Safe for concurrent use.
type types struct {
	crd *apiextv1.CustomResourceDefinition // read-only once given

	once sync.Once
	tc   managedfields.TypeConverter
}

var _ managedfields.TypeConverter = (*types)(nil)

// newTypes returns the types of c, a CRD that is valid and will not change (a new version of
// the CRD gets new types).
func newTypes(c *apiextv1.CustomResourceDefinition) *types { return &types{crd: c} }

func (t *types) ObjectToTyped(obj runtime.Object, opts ...smdtyped.ValidationOptions) (*smdtyped.TypedValue, error) {
	return t.converter().ObjectToTyped(obj, opts...)
}

func (t *types) TypedToObject(v *smdtyped.TypedValue) (runtime.Object, error) {
	return t.converter().TypedToObject(v)
}

// converter returns the TypeConverter, built on first use. A CRD whose models cannot be built
// is typed by types deduced from its objects, as kube-apiserver does then.
func (t *types) converter() managedfields.TypeConverter {
	t.once.Do(func() {
		t.tc = managedfields.NewDeducedTypeConverter()
		models, err := modelsForApply(t.crd)
		if err != nil || len(models) == 0 {
			return
		}
		if tc, err := managedfields.NewTypeConverter(models, t.crd.Spec.PreserveUnknownFields); err == nil {
			t.tc = tc
		}
		t.crd = nil // no longer needed
	})
	return t.tc
}

// modelsForApply is the OpenAPI v3 schemas of c's versions merged, as kube-apiserver's
// buildOpenAPIModelsForApply makes them (without its static specification of the built-in
// types: each version's document carries the definitions of the metadata types it refers to).
func modelsForApply(c *apiextv1.CustomResourceDefinition) (map[string]*spec.Schema, error) {
	var specs []*spec3.OpenAPI
	for _, v := range c.Spec.Versions {
		s, err := builder.BuildOpenAPIV3(c, v.Name, builder.Options{})
		if err != nil {
			return nil, fmt.Errorf("crd %s: version %s: %w", c.Name, v.Name, err)
		}
		specs = append(specs, s)
	}
	merged, err := builder.MergeSpecsV3(specs...)
	if err != nil {
		return nil, err
	}
	if merged.Components == nil {
		return nil, nil
	}
	return merged.Components.Schemas, nil
}
