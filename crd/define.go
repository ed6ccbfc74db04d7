package crd

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// A CRD is checked as kube-apiserver checks it: apiextensions.k8s.io/v1's defaults (applied
// when a request is decoded there), the strategy's PrepareForCreate and PrepareForUpdate, then
// apiextensions-apiserver's own validation (pkg/apis/apiextensions/validation) on the internal
// types, reached through the conversion functions its scheme registers: names, versions,
// structural schemas, defaults, CEL rules compiled with their estimated cost against the
// budget. Nothing here decides what is valid; it only arranges the calls the way
// kube-apiserver's CRD strategy (pkg/registry/customresourcedefinition) makes them.

// defaultCRD applies apiextensions.k8s.io/v1's defaults to c: singular and listKind from the
// kind, conversion None, the storage version in status.storedVersions, a webhook service's port.
func defaultCRD(c *apiextv1.CustomResourceDefinition) {
	apiextv1.SetObjectDefaults_CustomResourceDefinition(c)
	c.APIVersion, c.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
}

// prepareForCreate is the strategy's PrepareForCreate: a new CRD's status is kube-apiserver's
// to write, and starts with its storage version stored.
func prepareForCreate(c *apiextv1.CustomResourceDefinition) {
	c.Status = apiextv1.CustomResourceDefinitionStatus{}
	addStoredVersion(c)
}

// prepareForUpdate is the strategy's PrepareForUpdate: an update keeps the stored status, and a
// new storage version joins status.storedVersions.
func prepareForUpdate(c, old *apiextv1.CustomResourceDefinition) {
	c.Status = *old.Status.DeepCopy()
	addStoredVersion(c)
}

func addStoredVersion(c *apiextv1.CustomResourceDefinition) {
	for _, v := range c.Spec.Versions {
		if v.Storage {
			if !slices.Contains(c.Status.StoredVersions, v.Name) {
				c.Status.StoredVersions = append(c.Status.StoredVersions, v.Name)
			}
			return
		}
	}
}

// internal converts c to the internal apiextensions types validation works on.
func internal(c *apiextv1.CustomResourceDefinition) (*apiextensions.CustomResourceDefinition, error) {
	out := &apiextensions.CustomResourceDefinition{}
	if err := apiextv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(c, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// validateCRD validates c, a create (old nil) or an update of old, with apiextensions-apiserver's
// validation, and returns its errors and the warnings kube-apiserver's strategy gives.
func validateCRD(ctx context.Context, c, old *apiextv1.CustomResourceDefinition) (field.ErrorList, []string, error) {
	in, err := internal(c)
	if err != nil {
		return nil, nil, err
	}
	if old == nil {
		return validation.ValidateCustomResourceDefinition(ctx, in), crdWarnings(&in.Spec, nil), nil
	}
	inOld, err := internal(old)
	if err != nil {
		return nil, nil, err
	}
	return validation.ValidateCustomResourceDefinitionUpdate(ctx, in, inOld), crdWarnings(&in.Spec, &inOld.Spec), nil
}

// crdWarnings are the strategy's WarningsOnCreate (old nil) and WarningsOnUpdate: formats the
// schema validator does not know, then list-type sets of objects or arrays (sorted), each only
// when the update brings it in.
func crdWarnings(cs, old *apiextensions.CustomResourceDefinitionSpec) []string {
	formats, listSets := schemaWarnings(cs)
	oldFormats, oldSets := sets.New[string](), sets.New[string]()
	if old != nil {
		f, s := schemaWarnings(old)
		oldFormats.Insert(f...)
		oldSets = s
	}
	var out []string
	for _, f := range formats {
		if !oldFormats.Has(f) {
			out = append(out, fmt.Sprintf("unrecognized format %q", f))
		}
	}
	for _, w := range sets.List(listSets) {
		if !oldSets.Has(w) {
			out = append(out, w)
		}
	}
	return out
}

// schemaWarnings returns the unrecognized formats of every schema of cs, in schema order, and
// the warnings about list-type sets of objects or arrays.
func schemaWarnings(cs *apiextensions.CustomResourceDefinitionSpec) (formats []string, listSets sets.Set[string]) {
	compat := environment.DefaultCompatibilityVersion()
	listSets = sets.New[string]()
	each := func(s *apiextensions.JSONSchemaProps) bool {
		if s.Format != "" {
			ss := &spec.Schema{SchemaProps: spec.SchemaProps{Format: s.Format, Type: []string{s.Type}}}
			formats = append(formats, apiservervalidation.GetUnrecognizedFormats(ss, compat)...)
		}
		if s.XListType != nil && *s.XListType == "set" && s.Items != nil && s.Items.Schema != nil {
			switch t := s.Items.Schema.Type; t {
			case "object", "array":
				listSets.Insert(fmt.Sprintf("x-kubernetes-list-type: set for items of type %q is not supported by server-side apply or CEL validation rules", t))
			}
		}
		return false
	}
	if cs.Validation != nil && cs.Validation.OpenAPIV3Schema != nil {
		validation.SchemaHas(cs.Validation.OpenAPIV3Schema, each)
	}
	for _, v := range cs.Versions {
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			validation.SchemaHas(v.Schema.OpenAPIV3Schema, each)
		}
	}
	return formats, listSets
}
