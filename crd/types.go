package crd

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
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
	crd     *apiextv1.CustomResourceDefinition // read-only once given
	builtIn bool                               // its models may be compiled in (builtInModels)

	once sync.Once
	tc   managedfields.TypeConverter
}

var _ managedfields.TypeConverter = (*types)(nil)

// newTypes returns the types of c, a CRD that is valid and will not change (a new version of
// the CRD gets new types); builtIn says c is one of the server's own.
func newTypes(c *apiextv1.CustomResourceDefinition, builtIn bool) *types {
	return &types{crd: c, builtIn: builtIn}
}

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
		models, err := t.models()
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

// models returns the CRD's models: for a built-in CRD those compiled into the binary when
// they are its own (builtinmodels.go: opemu writes objects of its built-in CRDs at start, kwok's
// Stages, and apiextensions-apiserver's builder keeps about 1 MiB of definitions once it has
// run), else modelsForApply's.
func (t *types) models() (map[string]*spec.Schema, error) {
	if b, ok := builtInModels[t.crd.Name]; ok && t.builtIn && b.sum == specSum(t.crd) {
		var models map[string]*spec.Schema
		if err := json.Unmarshal([]byte(b.models), &models); err == nil {
			return models, nil
		}
	}
	return modelsForApply(t.crd)
}

// builtInModel is the models of one built-in CRD (modelsForApply's, without descriptions) as
// JSON, and the specSum of the CRD they were made from.
type builtInModel struct{ sum, models string }

// specSum is a digest of c's spec (as defaulted), which decides its models.
func specSum(c *apiextv1.CustomResourceDefinition) string {
	raw, err := json.Marshal(c.Spec)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}

// compactModels is modelsForApply's models of c as JSON, without their descriptions (the
// types do not read them): what builtinmodels.go keeps.
func compactModels(c *apiextv1.CustomResourceDefinition) (string, error) {
	models, err := modelsForApply(c)
	if err != nil {
		return "", err
	}
	raw, err := json.Marshal(models)
	if err != nil {
		return "", err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	dropDescriptions(v)
	raw, err = json.Marshal(v)
	return string(raw), err
}

// dropDescriptions removes every "description" string of v, a decoded JSON document.
func dropDescriptions(v any) {
	switch v := v.(type) {
	case map[string]any:
		if _, ok := v["description"].(string); ok {
			delete(v, "description")
		}
		for _, e := range v {
			dropDescriptions(e)
		}
	case []any:
		for _, e := range v {
			dropDescriptions(e)
		}
	}
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
