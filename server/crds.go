package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// CustomResourceDefinitions are objects in the store (so they list and watch like any other)
// whose writes also register, replace or unregister their kinds in the crd registry.

var crdKind = &crd.Kind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition", ListKind: "CustomResourceDefinitionList",
	Plural: "customresourcedefinitions", Singular: "customresourcedefinition", ShortNames: []string{"crd", "crds"}, StorageVersion: "v1", StatusSubresource: true}

var crdGK = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

func init() {
	builtinKinds[[3]string{"apiextensions.k8s.io", "v1", "customresourcedefinitions"}] = crdKind
}

func crdKey(name string) cache.Key {
	return cache.Key{Group: crdKind.Group, Resource: crdKind.Plural, Name: name}
}

// storeRegisteredCRDs puts every CRD the registry holds (the built-in Application) into the store.
func (s *Server) storeRegisteredCRDs() error {
	for _, c := range s.cfg.CRDs.CRDs() {
		obj, err := toMap(c)
		if err != nil {
			return err
		}
		if _, err := s.cfg.Store.Create(context.Background(), crdKey(c.Name), obj, cache.WriteOptions{}); err != nil && !errors.Is(err, cache.ErrAlreadyExists) {
			return err
		}
	}
	return nil
}

// celWarning is the Warning a CRD with CEL rules gets: opemu does not evaluate them.
const celWarning = "x-kubernetes-validations (CEL rules) are accepted but not evaluated by opemu"

// registerCRD registers obj's kinds before it is stored and replaces obj with the registry's
// copy (names defaulted, Established and NamesAccepted). A dry run only validates. It returns
// the warnings to send.
func (s *Server) registerCRD(t target, obj map[string]any, o writeOptions) ([]string, error) {
	if t.kind != crdKind {
		return nil, nil
	}
	var c apiextv1.CustomResourceDefinition
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, badRequest("the body is not a CustomResourceDefinition: %v", err)
	}
	var warnings []string
	if strings.Contains(string(raw), `"x-kubernetes-validations"`) {
		warnings = append(warnings, celWarning)
	}
	if o.dryRun {
		scratch, err := crd.New()
		if err != nil {
			return nil, err
		}
		_, errs, err := scratch.Register(&c)
		return warnings, crdError(c.Name, errs, err)
	}
	stored, errs, err := s.cfg.CRDs.Register(&c)
	if err := crdError(c.Name, errs, err); err != nil {
		return nil, err
	}
	md := metadataOf(obj)
	next, err := toMap(stored)
	if err != nil {
		return nil, err
	}
	next["metadata"] = md
	for k := range obj {
		delete(obj, k)
	}
	for k, v := range next {
		obj[k] = v
	}
	return warnings, nil
}

func crdError(name string, errs field.ErrorList, err error) error {
	switch {
	case errors.Is(err, crd.ErrBuiltIn):
		return apierrors.NewForbidden(schema.GroupResource{Group: crdKind.Group, Resource: crdKind.Plural}, name, err)
	case err != nil:
		return err
	case len(errs) > 0:
		return apierrors.NewInvalid(crdGK, name, errs)
	}
	return nil
}

// unregisterCRD stops serving a deleted CRD's kinds and deletes their objects.
func (s *Server) unregisterCRD(ctx context.Context, t target, o writeOptions) error {
	if t.kind != crdKind || o.dryRun {
		return nil
	}
	cur, ok := s.cfg.CRDs.CRD(t.key.Name)
	if !ok {
		return nil
	}
	if err := s.cfg.CRDs.Unregister(t.key.Name); err != nil {
		return crdError(t.key.Name, nil, err)
	}
	_, err := s.cfg.Store.DropResource(ctx, cache.GroupResource{Group: cur.Spec.Group, Resource: cur.Spec.Names.Plural})
	return err
}

func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return cache.DecodeJSON(raw)
}
