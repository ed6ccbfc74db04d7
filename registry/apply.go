package registry

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// Server-side apply through apimachinery's managedfields: field ownership in
// metadata.managedFields, conflicts between managers, removal of fields a manager stops
// applying. Kinds with a TypeConverter (the built-ins served from Go types) merge with their
// real list and map keys; for the others types are deduced from the objects (maps are granular,
// lists atomic), as for a CRD without a schema. To keep plain writes cheap, ownership is tracked
// only for objects that a server-side apply has touched: once an object carries managedFields,
// every later write to it records its manager too.

// fieldManagerFor returns k's FieldManager, made on first use.
func (s *Store) fieldManagerFor(k *kinds.Kind) (*managedfields.FieldManager, error) {
	gvk := schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
	if fm, ok := s.fieldManagers.Load(gvk); ok {
		return fm.(*managedfields.FieldManager), nil
	}
	var fm *managedfields.FieldManager
	var err error
	if k.TypeConverter != nil {
		fm, err = managedfields.NewDefaultFieldManager(k.TypeConverter, unstructuredConvertor{}, noDefaults{},
			unstructuredCreater{}, gvk, gvk.GroupVersion(), "", nil)
	} else {
		fm, err = managedfields.NewDefaultCRDFieldManager(managedfields.NewDeducedTypeConverter(), unstructuredConvertor{}, noDefaults{},
			unstructuredCreater{}, gvk, gvk.GroupVersion(), "", nil)
	}
	if err != nil {
		return nil, err
	}
	actual, _ := s.fieldManagers.LoadOrStore(gvk, fm)
	return actual.(*managedfields.FieldManager), nil
}

// applyObject merges applied into live (nil: the object does not exist yet) as manager.
func (s *Store) applyObject(k *kinds.Kind, live, applied map[string]any, manager string, force bool) (map[string]any, error) {
	fm, err := s.fieldManagerFor(k)
	if err != nil {
		return nil, err
	}
	liveObj := &unstructured.Unstructured{Object: plainNumbers(live)}
	applied = plainNumbers(applied)
	if live == nil {
		liveObj = &unstructured.Unstructured{Object: map[string]any{}}
		liveObj.SetAPIVersion(k.GroupVersion())
		liveObj.SetKind(k.Kind)
	}
	out, err := fm.Apply(liveObj, &unstructured.Unstructured{Object: applied}, manager, force)
	if err != nil {
		var st apierrors.APIStatus
		if errors.As(err, &st) {
			return nil, err
		}
		// The applied configuration does not fit the kind's types (kube-apiserver answers 500).
		return nil, badRequest("%v", err)
	}
	return out.(*unstructured.Unstructured).Object, nil
}

// trackUpdate records the ownership of what the write (its field manager, or its user agent)
// changed from live to next, when live is already tracked. An object nested too deeply to
// track is refused (checkDepth).
func (s *Store) trackUpdate(t Target, live, next map[string]any, o Options) (map[string]any, error) {
	md, _ := live["metadata"].(map[string]any)
	if _, tracked := md["managedFields"]; !tracked {
		return next, nil
	}
	manager := managerOrUserAgent(o.FieldManager, o.UserAgent)
	if err := checkDepth(t, next, "an object whose fields are managed"); err != nil {
		return nil, err
	}
	fm, err := s.fieldManagerFor(t.Kind)
	if err != nil {
		return next, nil
	}
	if manager == "" {
		manager = "unknown"
	}
	k := t.Kind
	if k.TypeConverter == nil {
		out := fm.UpdateNoErrors(&unstructured.Unstructured{Object: plainNumbers(live)}, &unstructured.Unstructured{Object: plainNumbers(next)}, manager)
		return out.(*unstructured.Unstructured).Object, nil
	}
	// Typed kinds: next is not pruned yet (admission does it, with the client's warnings), so
	// ownership is computed on a pruned copy; an object that does not fit the types keeps the
	// ownership it had, and validation refuses it.
	cp := plainNumbers(next)
	if k.Schema != nil {
		k.Schema.Prune(cp)
	}
	out, err := fm.Update(&unstructured.Unstructured{Object: plainNumbers(live)}, &unstructured.Unstructured{Object: cp}, manager)
	managed := md["managedFields"]
	if err == nil {
		managed = metadataOf(out.(*unstructured.Unstructured).Object)["managedFields"]
	}
	if managed == nil {
		delete(metadataOf(next), "managedFields")
	} else {
		metadataOf(next)["managedFields"] = managed
	}
	return next, nil
}

// managerOrUserAgent names the manager of a write as kube-apiserver does: the fieldManager
// parameter, else the User-Agent up to its first "/" (kubectl's "kubectl-client-side-apply" is
// a fieldManager; client-go's default agent gives "main" or the program's name). Kubernetes does
// not record the authenticated user here, and neither does opemu.
func managerOrUserAgent(manager, userAgent string) string {
	if manager != "" {
		return manager
	}
	var b strings.Builder
	for _, r := range strings.Split(userAgent, "/")[0] {
		if !unicode.IsPrint(r) {
			continue
		}
		if b.Len()+utf8.RuneLen(r) > validation.FieldManagerMaxLength {
			break
		}
		b.WriteRune(r)
	}
	return b.String()
}

// plainNumbers returns m with json.Number values as int64 or float64, the number types
// structured-merge-diff understands.
func plainNumbers(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return plainValue(m).(map[string]any)
}

func plainValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = plainValue(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = plainValue(e)
		}
		return out
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		f, _ := v.Float64()
		return f
	}
	return v
}

// unstructuredConvertor converts nothing: every served version shares one stored form.
type unstructuredConvertor struct{}

func (unstructuredConvertor) Convert(in, out, _ any) error {
	return fmt.Errorf("server: conversion is not supported")
}

func (unstructuredConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("server: cannot convert %T", in)
	}
	out := u.DeepCopy()
	if target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()}); ok {
		out.SetGroupVersionKind(target)
	}
	return out, nil
}

func (unstructuredConvertor) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}
