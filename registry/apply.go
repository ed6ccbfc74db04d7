package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/yaml"
)

// Server-side apply through apimachinery's managedfields: field ownership in
// metadata.managedFields, conflicts between managers, removal of fields a manager stops
// applying. Kinds with a TypeConverter (the built-ins served from Go types) merge with their
// real list and map keys; for the others types are deduced from the objects (maps are granular,
// lists atomic), as for a CRD without a schema. To keep plain writes cheap, ownership is tracked
// only for objects that a server-side apply has touched: once an object carries managedFields,
// every later write to it records its manager too.

// applyPatch is server-side apply (ssa.go) as kube-apiserver's apply patcher does it: the body
// converted to JSON before the object is read (a 400 "error encoding patch"), decoded as YAML
// (a 400 "error decoding patch"), merged by the field manager (which refuses an applied
// configuration of another kind or version, and answers 500 for one whose fields its types do
// not declare, whatever fieldValidation says), then, as fieldValidation says, refused or warned
// about for what repeats in it. The applied configuration creates the object when it is missing
// and is otherwise merged with field ownership; a field another manager owns is a 409 unless
// force is set.
func (s *Store) applyPatch(ctx context.Context, t Target, body []byte, o Options) (Result, error) {
	if o.FieldManager == "" {
		return Result{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "",
			field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
	}
	switch t.Sub {
	case "", "status":
	case "scale":
		if t.Kind.Scale == nil {
			return Result{}, UnsupportedMediaType(jsonPatchType + ", " + mergePatchType)
		}
	default:
		return Result{}, UnsupportedMediaType(jsonPatchType + ", " + mergePatchType)
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' && jsonDeeperThan(trimmed, maxPatchDepth) {
		// JSON (which is YAML too) is measured before the costly YAML conversion.
		return Result{}, tooDeep(t, "the applied configuration")
	}
	js, err := utilyaml.ToJSON(body)
	if err != nil {
		return Result{}, badRequest("error encoding patch: %v", err)
	}
	applied, repeats, err := decodeApplied(body, js)
	if err != nil {
		return Result{}, err
	}
	if err := checkDepth(t, applied, "the applied configuration"); err != nil {
		return Result{}, err
	}
	if err := checkManagedWidth("the applied configuration", applied); err != nil {
		return Result{}, err
	}
	if err := checkAppliedFields(t, applied); err != nil {
		return Result{}, err
	}
	var warnings []string
	// After the merge, as kube-apiserver checks them: the name, what repeats.
	strict := func(obj map[string]any) error {
		switch name := stringOf(metadataOf(obj)["name"]); name {
		case t.Key.Name:
		case "":
			return badRequest("the name of the object (%s based on URL) was undeterminable: name must be provided", t.Key.Name)
		default:
			return badRequest("the name of the object (%s) does not match the name on the URL (%s)", name, t.Key.Name)
		}
		if o.FieldValidation == "Ignore" || !repeats {
			return nil
		}
		if err := yaml.UnmarshalStrict(body, &map[string]any{}); err != nil {
			if o.FieldValidation == "Strict" {
				return badRequest("error strict decoding patch: %v", err)
			}
			warnings = yamlWarnings(err.Error())
		}
		return nil
	}
	o.decoded = fromApply
	if t.Sub == "scale" {
		res, err := s.applyScale(ctx, t, applied, o, strict)
		res.Warnings = append(warnings, res.Warnings...)
		return res, err
	}
	var res Result
	// A subresource is applied to an object that exists (else the update's 404).
	if _, err = s.cfg.Storage.Get(ctx, t.Key); t.Sub == "" && errors.Is(err, cache.ErrNotFound) {
		var obj map[string]any
		if obj, err = s.applyObject(t.Kind, "", nil, applied, o.FieldManager, o.Force); err != nil {
			return Result{}, err
		}
		if err := strict(obj); err != nil {
			return Result{}, err
		}
		res, err = s.Create(ctx, t, obj, o)
		res.Created = err == nil
		// Created meanwhile (by another apply, or through another replica whose write this
		// one's store had not seen yet): apply to it instead.
		if !errors.Is(err, cache.ErrAlreadyExists) {
			res.Warnings = append(warnings, res.Warnings...)
			return res, err
		}
	}
	res, err = s.update(ctx, t, o, func(cur map[string]any) (map[string]any, error) {
		if err := checkDepth(t, cur, "the live object"); err != nil {
			return nil, err
		}
		if err := checkManagedWidth("the live object", cur); err != nil {
			return nil, err
		}
		obj, err := s.applyObject(t.Kind, t.Sub, deepCopy(cur), deepCopy(applied), o.FieldManager, o.Force)
		if err == nil {
			warnings = nil
			err = strict(obj)
		}
		return obj, err
	})
	res.Warnings = append(warnings, res.Warnings...)
	return res, err
}

// decodeApplied decodes an applied configuration (js: body as JSON) as kube-apiserver's apply
// patcher does (sigs.k8s.io/yaml into a map: null is an empty configuration), numbers as
// json.Number where jsonfast reads it. repeats says some object in it may repeat a field.
func decodeApplied(body, js []byte) (map[string]any, bool, error) {
	if v, repeats, ok := jsonfast.Parse(js); ok && numbersFit(v) {
		if m, isObject := v.(map[string]any); isObject {
			// JSON repeats what its YAML repeats; YAML converted to JSON repeats nothing.
			return m, repeats || !bytes.Equal(body, js), nil
		}
	}
	var m map[string]any
	if err := yaml.Unmarshal(body, &m); err != nil {
		return nil, false, badRequest("error decoding patch: %v", err)
	}
	if m == nil {
		m = map[string]any{}
	}
	return m, true, nil
}

// checkAppliedFields refuses, with the 500 kube-apiserver's field manager gives, an applied
// configuration of a custom resource with fields its schema does not declare (or that
// ObjectMeta does not): opemu's field manager of custom resources deduces their types from the
// objects, so it would take them. A built-in kind's field manager refuses them itself.
func checkAppliedFields(t Target, applied map[string]any) error {
	bt := bodyTypeOf(t)
	if !bt.custom {
		return nil
	}
	gvk, _ := typeMetaOf(applied)
	if gvk != bt.gvk {
		return nil // the field manager refuses another kind or version first
	}
	cp := deepCopy(applied)
	unknown, err := customUnknown(t, bt, cp, gvk)
	if err != nil || len(unknown) == 0 {
		return nil
	}
	errs := make(typed.ValidationErrors, len(unknown))
	for i, p := range unknown {
		errs[i] = typed.ValidationError{Path: "." + p, ErrorMessage: "field not declared in schema"}
	}
	md := metadataOf(cp)
	return serverError(fmt.Sprintf("failed to create typed patch object (%s/%s; %v): %v", stringOf(md["namespace"]), stringOf(md["name"]), gvk, errs))
}

// fieldManagerKey names a FieldManager: the kind's, of its main resource or a subresource.
type fieldManagerKey struct {
	gvk schema.GroupVersionKind
	sub string // "", "status" or "scale"
}

// scaleGVK is the kind of the scale subresource's objects.
var scaleGVK = schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}

// fieldManagerFor returns the FieldManager of k's main resource (sub "") or of its status or
// scale subresource, made on first use. A subresource's records its writes with their
// subresource; each ignores the fields its writes may not change (kube-apiserver's strategies'
// GetResetFields: status on the main resource of a kind with a status subresource, spec and the
// kind's StatusResets on /status). The scale subresource's merges autoscaling/v1 Scale objects
// with types deduced from them (client-go's schema has no Scale; a Scale has no lists).
func (s *Store) fieldManagerFor(k *kinds.Kind, sub string) (*managedfields.FieldManager, error) {
	gvk := schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
	key := fieldManagerKey{gvk: gvk, sub: sub}
	if fm, ok := s.fieldManagers.Load(key); ok {
		return fm.(*managedfields.FieldManager), nil
	}
	var reset []fieldpath.Path
	switch sub {
	case "":
		if k.Status {
			reset = append(reset, fieldpath.MakePathOrDie("status"))
		}
	case "status":
		reset = append(reset, fieldpath.MakePathOrDie("spec"))
		for _, p := range k.StatusResets {
			if p != "spec" {
				reset = append(reset, fieldpath.MakePathOrDie(toPathElements(jsonPath(p))...))
			}
		}
	case "scale":
		gvk = scaleGVK
	}
	var resetFields map[fieldpath.APIVersion]fieldpath.Filter
	if len(reset) > 0 {
		resetFields = map[fieldpath.APIVersion]fieldpath.Filter{
			fieldpath.APIVersion(gvk.GroupVersion().String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(reset...)),
		}
	}
	var fm *managedfields.FieldManager
	var err error
	if k.TypeConverter != nil && sub != "scale" {
		fm, err = managedfields.NewDefaultFieldManager(k.TypeConverter, unstructuredConvertor{}, noDefaults{},
			unstructuredCreater{}, gvk, gvk.GroupVersion(), sub, resetFields)
	} else {
		fm, err = managedfields.NewDefaultCRDFieldManager(managedfields.NewDeducedTypeConverter(), unstructuredConvertor{}, noDefaults{},
			unstructuredCreater{}, gvk, gvk.GroupVersion(), sub, resetFields)
	}
	if err != nil {
		return nil, err
	}
	actual, _ := s.fieldManagers.LoadOrStore(key, fm)
	return actual.(*managedfields.FieldManager), nil
}

// toPathElements makes the keys of a path the arguments of fieldpath.MakePathOrDie.
func toPathElements(keys []string) []any {
	out := make([]any, len(keys))
	for i, k := range keys {
		out[i] = k
	}
	return out
}

// applyScale is server-side apply on the scale subresource, as kube-apiserver's scale storage
// does it: the object's Scale carries the managedFields of its replicas (managedfields'
// ScaleHandler: the entries that own the replicas path, as autoscaling/v1), the Scale field
// manager merges applied into it, and its replicas and entries go back to the object.
func (s *Store) applyScale(ctx context.Context, t Target, applied map[string]any, o Options, strict func(map[string]any) error) (Result, error) {
	gv := schema.GroupVersion{Group: t.Kind.Group, Version: t.Kind.Version}
	mappings := managedfields.ResourcePathMappings{gv.String(): fieldpath.MakePathOrDie(toPathElements(jsonPath(t.Kind.Scale.SpecReplicasPath))...)}
	return s.update(ctx, t, o, func(cur map[string]any) (map[string]any, error) {
		parent, err := managedFieldsOf(cur)
		if err != nil {
			return nil, err
		}
		if len(parent) == 0 {
			// An object no write tracked yet: its fields are before-first-apply's, as the main
			// resource's field manager has them on a first apply.
			if err := checkManagedWidth("the object", cur); err != nil {
				return nil, err
			}
			if parent, err = s.beforeFirstApply(t.Kind, cur); err != nil {
				return nil, err
			}
		}
		h := managedfields.NewScaleHandler(parent, gv, mappings)
		entries, err := h.ToSubresource()
		if err != nil {
			return nil, serverError(err.Error())
		}
		scale := scaleOf(t, cur)
		if err := setManagedFields(scale, entries); err != nil {
			return nil, err
		}
		out, err := s.applyObject(t.Kind, "scale", scale, deepCopy(applied), o.FieldManager, o.Force)
		if err != nil {
			return nil, err
		}
		if err := strict(out); err != nil {
			return nil, err
		}
		raw, err := jsonfast.Marshal(out)
		if err != nil {
			return nil, err
		}
		if out, err = DecodeObject(raw); err != nil { // numbers as the rest of the write path has them
			return nil, err
		}
		next, err := fromScale(t, deepCopy(cur), out)
		if err != nil {
			return nil, err
		}
		if entries, err = managedFieldsOf(out); err != nil {
			return nil, err
		}
		if entries, err = h.ToParent(entries); err != nil {
			return nil, serverError(err.Error())
		}
		return next, setManagedFields(next, entries)
	})
}

// beforeFirstApply returns the managedFields of obj, which has none, as the main resource's
// field manager makes them before a first apply: every field owned by the manager
// "before-first-apply", an Update.
func (s *Store) beforeFirstApply(k *kinds.Kind, obj map[string]any) ([]metav1.ManagedFieldsEntry, error) {
	fm, err := s.fieldManagerFor(k, "")
	if err != nil {
		return nil, err
	}
	empty := &unstructured.Unstructured{Object: map[string]any{}}
	empty.SetAPIVersion(k.GroupVersion())
	empty.SetKind(k.Kind)
	out := fm.UpdateNoErrors(empty, &unstructured.Unstructured{Object: plainNumbers(obj)}, "before-first-apply")
	return managedFieldsOf(out.(*unstructured.Unstructured).Object)
}

// managedFieldsOf decodes obj's metadata.managedFields.
func managedFieldsOf(obj map[string]any) ([]metav1.ManagedFieldsEntry, error) {
	raw, ok := metadataOf(obj)["managedFields"]
	if !ok || raw == nil {
		return nil, nil
	}
	var om metav1.ObjectMeta
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"managedFields": plainValue(raw)}, &om); err != nil {
		return nil, serverError(fmt.Sprintf("decoding managedFields: %v", err))
	}
	return om.ManagedFields, nil
}

// setManagedFields sets obj's metadata.managedFields to entries (none: removed).
func setManagedFields(obj map[string]any, entries []metav1.ManagedFieldsEntry) error {
	md := metadataOf(obj)
	if len(entries) == 0 {
		delete(md, "managedFields")
		return nil
	}
	raw, err := json.Marshal(entries)
	if err != nil {
		return err
	}
	var v []any
	if err := json.Unmarshal(raw, &v); err != nil {
		return err
	}
	md["managedFields"] = v
	return nil
}

// applyObject merges applied into live (nil: the object does not exist yet) as manager, with
// the field manager of k's main resource or subresource sub.
func (s *Store) applyObject(k *kinds.Kind, sub string, live, applied map[string]any, manager string, force bool) (map[string]any, error) {
	fm, err := s.fieldManagerFor(k, sub)
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
		// The applied configuration does not fit the kind's types: kube-apiserver's 500.
		return nil, serverError(err.Error())
	}
	return out.(*unstructured.Unstructured).Object, nil
}

// trackUpdate records the ownership of what the write (its field manager, or its user agent)
// changed from live to next (with its subresource, for a /status write), when live is already
// tracked. An object nested too deeply or too wide to track is refused (checkDepth,
// checkManagedWidth).
func (s *Store) trackUpdate(t Target, live, next map[string]any, o Options) (map[string]any, error) {
	md, _ := live["metadata"].(map[string]any)
	if _, tracked := md["managedFields"]; !tracked {
		return next, nil
	}
	manager := managerOrUserAgent(o.FieldManager, o.UserAgent)
	if err := checkDepth(t, next, "an object whose fields are managed"); err != nil {
		return nil, err
	}
	for _, obj := range []map[string]any{live, next} {
		if err := checkManagedWidth("an object whose fields are managed", obj); err != nil {
			return nil, err
		}
	}
	fm, err := s.fieldManagerFor(t.Kind, t.Sub)
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

// PlainNumbers returns a deep copy of m with json.Number values as int64 or float64, the number
// types structured-merge-diff and CEL understand (the admission policies' objects).
func PlainNumbers(m map[string]any) map[string]any { return plainNumbers(m) }

// plainNumbers is PlainNumbers.
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
