package crd

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CustomResourceDefinitions are objects in the store (so they list and watch like any other)
// whose writes also register, replace or unregister their kinds: the Kind below carries that
// as its Lifecycle.

// Resource is where CRDs are stored.
var Resource = cache.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}

// Kind returns the apiextensions.k8s.io/v1 CustomResourceDefinition kind, whose writes go
// through r.
func (r *Registry) Kind() *kinds.Kind {
	return &kinds.Kind{
		Group: Resource.Group, Version: "v1", Kind: "CustomResourceDefinition", ListKind: "CustomResourceDefinitionList",
		Plural: Resource.Resource, Singular: "customresourcedefinition", ShortNames: []string{"crd", "crds"}, Categories: []string{"api-extensions"},
		Status: true,
		Columns: []kinds.Column{kinds.NameColumn, {Def: metav1.TableColumnDefinition{Name: "Created At", Type: "date"}, Cell: func(obj map[string]any, _ time.Time) any {
			md, _ := obj["metadata"].(map[string]any)
			ts, _ := md["creationTimestamp"].(string)
			return ts
		}}},
		Lifecycle: lifecycle{r},
		// apiextensions.k8s.io/v1's defaults, applied when kube-apiserver decodes a /status
		// write: an emptied status.storedVersions is the storage version.
		PrepareStatusUpdate: defaultStoredVersions,
	}
}

// defaultStoredVersions gives obj, a CRD, its storage version in status.storedVersions when it
// has none.
func defaultStoredVersions(obj, _ map[string]any) {
	st, _ := obj["status"].(map[string]any)
	if sv, _ := st["storedVersions"].([]any); len(sv) > 0 {
		return
	}
	spec, _ := obj["spec"].(map[string]any)
	versions, _ := spec["versions"].([]any)
	for _, v := range versions {
		if v, _ := v.(map[string]any); v["storage"] == true {
			if st == nil {
				st = map[string]any{}
				obj["status"] = st
			}
			st["storedVersions"] = []any{v["name"]}
			return
		}
	}
}

// lifecycle registers a CRD's kinds once it is stored, and unregisters them (dropping their
// objects) once it is gone.
type lifecycle struct{ r *Registry }

var gk = k8sschema.GroupKind{Group: Resource.Group, Kind: "CustomResourceDefinition"}

// BeforeWrite validates the CRD as kube-apiserver does and rewrites obj into its stored form
// (defaulted; Established and NamesAccepted), registering nothing yet. A built-in CRD may be
// created (the server seeds it at start: it gets the registered copy) but not replaced.
func (l lifecycle) BeforeWrite(_ context.Context, obj, old map[string]any, _ bool) ([]string, error) {
	c, err := decodeCRD(obj)
	if err != nil {
		return nil, err
	}
	if l.r.IsBuiltIn(c.Name) {
		if old != nil {
			return nil, builtInError(c.Name)
		}
		stored, _ := l.r.CRD(c.Name)
		return nil, replaceBody(obj, stored)
	}
	var prev *apiextv1.CustomResourceDefinition
	if old != nil {
		if prev, err = decodeCRD(old); err != nil {
			return nil, err
		}
	}
	stored, warnings, errs, err := l.r.Check(c, prev)
	if err != nil || len(errs) > 0 {
		return nil, statusOf(c.Name, errs, err)
	}
	return warnings, replaceBody(obj, stored)
}

// decodeCRD decodes obj into a CustomResourceDefinition.
func decodeCRD(obj map[string]any) (*apiextv1.CustomResourceDefinition, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	var c apiextv1.CustomResourceDefinition
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, apierrors.NewBadRequest("the body is not a CustomResourceDefinition: " + err.Error())
	}
	return &c, nil
}

// BeforeDelete refuses to delete a built-in CRD.
func (l lifecycle) BeforeDelete(_ context.Context, name string) error {
	if l.r.IsBuiltIn(name) {
		return builtInError(name)
	}
	return nil
}

// AfterWrite serves the stored CRD's kinds, cleans a deleted one up (delete.go), or stops
// serving a removed one's and drops what is left of its objects.
func (l lifecycle) AfterWrite(ctx context.Context, o *cache.Object, removed bool) error {
	name := o.Key().Name
	if l.r.IsBuiltIn(name) {
		return nil
	}
	if removed {
		c, ok := l.r.CRD(name)
		if !ok {
			return nil
		}
		if err := l.r.Unregister(name); err != nil && !errors.Is(err, ErrNotFound) {
			return statusOf(name, nil, err)
		}
		if l.r.cfg.Drop == nil {
			return nil
		}
		_, err := l.r.cfg.Drop(ctx, cache.GroupResource{Group: c.Spec.Group, Resource: c.Spec.Names.Plural})
		return err
	}
	var c apiextv1.CustomResourceDefinition
	if err := json.Unmarshal(o.Raw(), &c); err != nil {
		return err
	}
	if _, errs, err := l.r.serve(&c); err != nil || len(errs) > 0 {
		return statusOf(name, errs, err)
	}
	if c.DeletionTimestamp != nil {
		return l.r.cleanUp(ctx, &c)
	}
	return nil
}

// replaceBody puts everything but metadata of c into obj.
func replaceBody(obj map[string]any, c *apiextv1.CustomResourceDefinition) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	next, err := cache.DecodeJSON(raw)
	if err != nil {
		return err
	}
	for k := range obj {
		if k != "metadata" {
			delete(obj, k)
		}
	}
	for k, v := range next {
		if k != "metadata" {
			obj[k] = v
		}
	}
	return nil
}

func builtInError(name string) error {
	return apierrors.NewForbidden(k8sschema.GroupResource{Group: Resource.Group, Resource: Resource.Resource}, name, ErrBuiltIn)
}

// statusOf turns a registration failure into its Status error (nil when there is none).
func statusOf(name string, errs field.ErrorList, err error) error {
	switch {
	case errors.Is(err, ErrBuiltIn):
		return builtInError(name)
	case err != nil:
		return err
	case len(errs) > 0:
		return apierrors.NewInvalid(gk, name, errs)
	}
	return nil
}
