package registry

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/opemu/opemu/internal/jsontree"
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
// lists atomic), as for a CRD without a schema. Every write records its manager, as in
// kube-apiserver: a create (trackCreate), an update or patch (trackUpdate), an apply.

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
// ObjectMeta does not). The field manager, typed by the CRD's schema, would refuse it too, but
// lists the fields in the random order of a walk of Go maps; here their order is fixed.
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
	gvk      schema.GroupVersionKind
	sub      string // "", "status" or "scale"
	managing bool   // the kind's ManagedTypes' (managerFor)
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
	return s.newFieldManager(k, sub, k.TypeConverter, false)
}

// managerFor returns the FieldManager that records the ownership of k's plain writes (sub ""
// or "status"): fieldManagerFor's, or for a kind with ManagedTypes one with those.
func (s *Store) managerFor(k *kinds.Kind, sub string) (*managedfields.FieldManager, error) {
	if k.ManagedTypes == nil {
		return s.fieldManagerFor(k, sub)
	}
	return s.newFieldManager(k, sub, k.ManagedTypes, true)
}

// newFieldManager returns the FieldManager of k's sub with types tc (nil: deduced), made on
// first use.
func (s *Store) newFieldManager(k *kinds.Kind, sub string, tc managedfields.TypeConverter, managing bool) (*managedfields.FieldManager, error) {
	gvk := schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
	key := fieldManagerKey{gvk: gvk, sub: sub, managing: managing}
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
	switch {
	case tc != nil && sub != "scale" && k.BuiltIn():
		fm, err = managedfields.NewDefaultFieldManager(tc, unstructuredConvertor{}, noDefaults{},
			unstructuredCreater{}, gvk, gvk.GroupVersion(), sub, resetFields)
	case tc != nil && sub != "scale":
		// A custom resource typed by its CRD's schema, as kube-apiserver's custom resource
		// handler makes its field managers: the request's version is the hub, and entries of
		// other versions are compared through the CRD's conversion.
		var conv runtime.ObjectConvertor = unstructuredConvertor{}
		if k.ManagedConvertor != nil {
			conv = k.ManagedConvertor
		}
		fm, err = managedfields.NewDefaultCRDFieldManager(tc, conv, noDefaults{},
			unstructuredCreater{}, gvk, gvk.GroupVersion(), sub, resetFields)
	default:
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
		h, scale, err := scaleWithOwners(t, cur, parent)
		if err != nil {
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
		return next, ownersToParent(h, next, out)
	})
}

// scaleWithOwners returns managedfields' ScaleHandler of obj, t's object whose managedFields
// are parent (it gives the entries that own the replicas path to the Scale and takes them
// back), and obj's Scale carrying those entries.
func scaleWithOwners(t Target, obj map[string]any, parent []metav1.ManagedFieldsEntry) (*managedfields.ScaleHandler, map[string]any, error) {
	gv := schema.GroupVersion{Group: t.Kind.Group, Version: t.Kind.Version}
	mappings := managedfields.ResourcePathMappings{gv.String(): fieldpath.MakePathOrDie(toPathElements(jsonPath(t.Kind.Scale.SpecReplicasPath))...)}
	h := managedfields.NewScaleHandler(parent, gv, mappings)
	entries, err := h.ToSubresource()
	if err != nil {
		return nil, nil, serverError(err.Error())
	}
	scale := scaleOf(t, obj)
	if err := setManagedFields(scale, entries); err != nil {
		return nil, nil, err
	}
	return h, scale, nil
}

// trackScale records the ownership of what a write to the scale subresource changed from live
// to next, as kube-apiserver's scale storage does: the Scale of live, carrying the entries
// that own its replicas, is updated to the Scale of next by the scale subresource's field
// manager, and the entries go back to next. An untracked object stays untracked.
func (s *Store) trackScale(t Target, live, next map[string]any, o Options) (map[string]any, error) {
	parent, err := managedFieldsOf(live)
	if err != nil || len(parent) == 0 {
		return next, err
	}
	fm, err := s.fieldManagerFor(t.Kind, "scale")
	if err != nil {
		return next, nil
	}
	h, liveScale, err := scaleWithOwners(t, live, parent)
	if err != nil {
		return nil, err
	}
	out, err := fm.Update(&unstructured.Unstructured{Object: plainNumbers(liveScale)}, &unstructured.Unstructured{Object: plainNumbers(scaleOf(t, next))}, writeManager(o))
	if err != nil {
		return next, nil // the Scale does not fit: the object keeps the ownership it had
	}
	return next, ownersToParent(h, next, out.(*unstructured.Unstructured).Object)
}

// ownersToParent gives next, the object, the managedFields of scale, its Scale after the
// write, through h (scaleWithOwners).
func ownersToParent(h *managedfields.ScaleHandler, next, scale map[string]any) error {
	entries, err := managedFieldsOf(scale)
	if err != nil {
		return err
	}
	if entries, err = h.ToParent(entries); err != nil {
		return serverError(err.Error())
	}
	return setManagedFields(next, entries)
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

// trackCreate records, in obj's metadata.managedFields, the ownership of a new object's fields
// by the write's manager (its field manager, or its user agent), an Update, as kube-apiserver's
// create handler does: after defaulting, before mutating admission (what a webhook adds is
// nobody's). managedFields the client sent are kept, as the field manager keeps them. An object
// nested too deeply or too wide to track (checkManagedWidth) is created untracked
// (kube-apiserver's UpdateNoErrors).
func (s *Store) trackCreate(t Target, obj map[string]any, o Options) error {
	if nestedDeeperThan(obj, maxPatchDepth) || checkManagedWidth("", obj) != nil {
		return nil
	}
	fm, err := s.managerFor(t.Kind, "")
	if err != nil {
		return nil
	}
	cp := managedCopy(t.Kind, obj)
	var key createShapeKey
	if shape, ok := createShape(t.Kind, cp); ok {
		key = createShapeKey{kind: t.Kind, manager: writeManager(o), shape: shape}
		if v, ok := s.createEntries.Load(key); ok {
			metadataOf(obj)["managedFields"] = timedNow(v.([]any))
			return nil
		}
	}
	empty := &unstructured.Unstructured{Object: s.emptyObject(t.Kind)}
	out := fm.UpdateNoErrors(empty, &unstructured.Unstructured{Object: cp}, writeManager(o))
	setManagedFieldsOf(obj, out.(*unstructured.Unstructured).Object)
	if entries, ok := metadataOf(obj)["managedFields"].([]any); ok && len(entries) == 1 && key.kind != nil && s.createShapes.Add(1) <= maxCreateShapes {
		s.createEntries.Store(key, deepCopyValue(entries))
	}
	return nil
}

// maxCreateShapes bounds the entries trackCreate remembers per Registry (createEntries).
const maxCreateShapes = 1024

// createShapeKey names the managedFields of a create: its kind, manager and object's shape.
type createShapeKey struct {
	kind    *kinds.Kind
	manager string
	shape   string
}

// createShape is the shape of obj, a new custom resource as the field manager sees it
// (managedCopy), when its managedFields depend on nothing else (ok false: they may): a custom
// resource's create is compared with an object of no fields, and its types (deduced, or its
// CRD's schema) are the same for every create of the kind, so the fields a create owns are
// decided by the paths of obj's map keys and the kind of each value (map, list, null, string,
// number, boolean), except in lists: an atomic list is one field, but the schema may make a
// list a set or a map whose fields are its values or keys, so an object with a list typed by
// a schema is not shaped. A create that carries managedFields of its own keeps them, and is
// not shaped.
func createShape(k *kinds.Kind, obj map[string]any) (string, bool) {
	custom := !k.BuiltIn() && k.ManagedTypes == nil
	if !custom && (k.TypeConverter != nil || k.ManagedTypes != nil) {
		return "", false
	}
	if _, sent := metadataOf(obj)["managedFields"]; sent {
		return "", false
	}
	var b strings.Builder
	if !appendShape(&b, obj, k.TypeConverter == nil) {
		return "", false
	}
	return b.String(), true
}

// appendShape writes v's shape: a map as its keys, sorted and quoted, each with its value's
// shape; a list, null or a scalar as one letter. It reports false, having stopped, at a list
// when lists is false.
func appendShape(b *strings.Builder, v any, lists bool) bool {
	switch v := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(v))
		b.WriteByte('{')
		for _, k := range keys {
			b.WriteString(strconv.Quote(k))
			if !appendShape(b, v[k], lists) {
				return false
			}
		}
		b.WriteByte('}')
	case []any:
		if !lists {
			return false
		}
		b.WriteByte('l')
	case nil:
		b.WriteByte('n')
	case string:
		b.WriteByte('s')
	case bool:
		b.WriteByte('b')
	default:
		b.WriteByte('#')
	}
	return true
}

// timedNow is a copy of entries, the managedFields of one create, timed now.
func timedNow(entries []any) []any {
	out := deepCopyValue(entries).([]any)
	for _, e := range out {
		if m, ok := e.(map[string]any); ok {
			m["time"] = time.Now().UTC().Format(time.RFC3339)
		}
	}
	return out
}

// emptyObject is the live object a create is compared with, as kube-apiserver's create handler
// makes it: a new object of the kind, which for a kind served from Go types is the Go zero
// value as unstructured (its empty structs and null lists present, so that a create owns their
// fields but not the structs themselves), for the others only its apiVersion and kind. It is
// shared by every create of k: the field manager only reads the live object it is given.
func (s *Store) emptyObject(k *kinds.Kind) map[string]any {
	if v, ok := s.emptyObjects.Load(k); ok {
		return v.(map[string]any)
	}
	obj := map[string]any{}
	if typed, ok := k.StrategicPatch.(runtime.Object); ok && (k.TypeConverter != nil || k.ManagedTypes != nil) {
		zero := reflect.New(reflect.TypeOf(typed).Elem()).Interface()
		if u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(zero); err == nil {
			obj = u
		}
	}
	obj["apiVersion"], obj["kind"] = k.GroupVersion(), k.Kind
	actual, _ := s.emptyObjects.LoadOrStore(k, obj)
	return actual.(map[string]any)
}

// trackUpdate records the ownership of what the write (its field manager, or its user agent)
// changed from live to next (with its subresource, for a /status or /scale write), when live is already
// tracked (kube-apiserver's field manager leaves an untracked object untracked). pruned says
// next is pruned and defaulted already. An object nested too deeply or too wide to track is
// refused (checkDepth, checkManagedWidth).
func (s *Store) trackUpdate(t Target, live, next map[string]any, o Options, pruned bool) (map[string]any, error) {
	md, _ := live["metadata"].(map[string]any)
	if _, tracked := md["managedFields"]; !tracked {
		return next, nil
	}
	if t.Sub == "scale" {
		return s.trackScale(t, live, next, o)
	}
	if entry, ok := sameOwnerUpdate(t, live, next, o); ok {
		if entry == nil {
			metadataOf(next)["managedFields"] = md["managedFields"]
		} else {
			metadataOf(next)["managedFields"] = []any{entry}
		}
		return next, nil
	}
	if err := checkDepth(t, next, "an object whose fields are managed"); err != nil {
		return nil, err
	}
	for _, obj := range []map[string]any{live, next} {
		if err := checkManagedWidth("an object whose fields are managed", obj); err != nil {
			return nil, err
		}
	}
	fm, err := s.managerFor(t.Kind, t.Sub)
	if err != nil {
		return next, nil
	}
	// A next not pruned yet (admission does it, with the client's warnings) is tracked as a
	// pruned copy; an object that does not fit the types keeps the ownership it had, and
	// validation refuses it.
	var cp map[string]any
	if !pruned && t.Kind.TypeConverter != nil && t.Kind.Schema != nil {
		cp = managedCopy(t.Kind, deepCopy(next)) // pruned all the way down: nothing shared
		t.Kind.Schema.Prune(cp)
	} else {
		cp = managedCopy(t.Kind, next)
	}
	out, err := fm.Update(&unstructured.Unstructured{Object: managedCopy(t.Kind, live)}, &unstructured.Unstructured{Object: cp}, writeManager(o))
	if err != nil {
		if managed, ok := md["managedFields"]; ok && managed != nil {
			metadataOf(next)["managedFields"] = managed
		} else {
			delete(metadataOf(next), "managedFields")
		}
		return next, nil
	}
	setManagedFieldsOf(next, out.(*unstructured.Unstructured).Object)
	return next, nil
}

// sameOwnerUpdate answers for the field manager when its answer is known without typing the
// objects (ok false: ask it): live's only managedFields entry is this write's own (its manager's
// Update, of the same apiVersion and subresource), and next changes nothing of live but values
// of scalar fields that entry owns, reached through maps only (for a kind typed by client-go's
// schema, at the top level only, where no union can clear another field), and, in metadata,
// the members no one owns (resourceVersion, uid, generation...). The field manager then takes those fields from the entry for the write
// and gives them back to the same manager: the entry is as it was, timed now (entry nil: as it
// was, the write changing nothing). The recorder's aggregation of an Event and a controller's
// updates of its own objects are such writes.
func sameOwnerUpdate(t Target, live, next map[string]any, o Options) (entry map[string]any, ok bool) {
	if t.Sub != "" && t.Sub != "status" || t.Kind.ManagedView != nil {
		return nil, false
	}
	lmd, nmd := metadataOf(live), metadataOf(next)
	entries, _ := lmd["managedFields"].([]any)
	if len(entries) != 1 {
		return nil, false
	}
	e, _ := entries[0].(map[string]any)
	owned, _ := e["fieldsV1"].(map[string]any)
	if owned == nil || e["manager"] != writeManager(o) || e["operation"] != string(metav1.ManagedFieldsOperationUpdate) ||
		e["apiVersion"] != t.Kind.GroupVersion() || stringOf(e["subresource"]) != t.Sub {
		return nil, false
	}
	if v, sent := nmd["managedFields"]; sent && !sameValue(v, lmd["managedFields"]) {
		return nil, false // the client's own managedFields
	}
	changed := false
	ownedMeta, _ := owned["f:metadata"].(map[string]any)
	if !ownedChanges(lmd, nmd, ownedMeta, strippedMeta, true, &changed) {
		return nil, false
	}
	skip := map[string]bool{"metadata": true}
	for _, f := range t.Kind.ManagedExtensions {
		skip[f] = true
	}
	// A custom resource's schema has no unions: its maps are as granular as deduced ones.
	nested := (t.Kind.TypeConverter == nil || !t.Kind.BuiltIn()) && t.Kind.ManagedTypes == nil
	if !ownedChanges(live, next, owned, skip, nested, &changed) {
		return nil, false
	}
	if !changed {
		return nil, true
	}
	entry = maps.Clone(e)
	entry["time"] = time.Now().UTC().Format(time.RFC3339)
	return entry, true
}

// strippedMeta are the members of metadata no one owns: the field manager strips them from
// every set, as kube-apiserver's does.
var strippedMeta = map[string]bool{"name": true, "namespace": true, "creationTimestamp": true, "selfLink": true,
	"uid": true, "clusterName": true, "generation": true, "resourceVersion": true, "managedFields": true}

// ownedChanges reports whether b differs from a only in values of scalar fields owned
// (fieldsV1: the members of owned whose value is empty or has "."), reached through maps when
// nested is true, and in fields removed that nothing in owned is under; the keys of skip
// aside. changed is set when an owned value differs.
func ownedChanges(a, b, owned map[string]any, skip map[string]bool, nested bool, changed *bool) bool {
	for k := range mergedKeys(a, b) {
		if skip[k] {
			continue
		}
		va, inA := a[k]
		vb, inB := b[k]
		if inA && !inB {
			if _, isOwned := owned["f:"+k]; isOwned {
				return false
			}
			continue // removed, and nobody's: no set changes
		}
		if !inA && inB {
			return false // added: the writer's now
		}
		if sameValue(va, vb) {
			continue
		}
		sub, isOwned := owned["f:"+k].(map[string]any)
		if !isOwned {
			return false
		}
		ma, aMap := va.(map[string]any)
		mb, bMap := vb.(map[string]any)
		switch {
		case aMap && bMap && nested:
			if !ownedChanges(ma, mb, sub, nil, nested, changed) {
				return false
			}
		case isScalar(va) && isScalar(vb):
			if _, member := sub["."]; len(sub) != 0 && !member {
				return false
			}
			*changed = true
		default:
			return false
		}
	}
	return true
}

// isScalar reports whether v is a JSON string, number or boolean (not null).
func isScalar(v any) bool {
	switch v.(type) {
	case nil, map[string]any, []any:
		return false
	}
	return true
}

// sameValue reports whether a and b are the same JSON value, numbers compared by value.
func sameValue(a, b any) bool {
	switch a := a.(type) {
	case map[string]any:
		b, ok := b.(map[string]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for k, v := range a {
			w, ok := b[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !sameValue(a[i], b[i]) {
				return false
			}
		}
		return true
	case string, bool, nil:
		return a == b
	}
	switch b.(type) {
	case map[string]any, []any, string, bool, nil:
		return false
	}
	na, nb := plainValue(a), plainValue(b)
	if fa, isFloat := na.(float64); isFloat {
		if ib, isInt := nb.(int64); isInt {
			return fa == float64(ib) // structured-merge-diff compares an int and a float so
		}
	}
	if ia, isInt := na.(int64); isInt {
		if fb, isFloat := nb.(float64); isFloat {
			return float64(ia) == fb
		}
	}
	return na == nb
}

// mergedKeys is the set of the keys of a and b.
func mergedKeys(a, b map[string]any) map[string]struct{} {
	keys := make(map[string]struct{}, len(a)+1)
	for k := range a {
		keys[k] = struct{}{}
	}
	for k := range b {
		keys[k] = struct{}{}
	}
	return keys
}

// managedCopy is the copy of obj, an object of k, the field manager sees (plainNumbers),
// without k's ManagedExtensions and the metadata members a client set to null: kube-apiserver
// decodes metadata into ObjectMeta first, where they are absent, so such a member is no change
// of anyone's fields.
//
// Only the object and its metadata are copied (the field manager changes nothing else: it
// takes managedFields out of the new object and puts them back, and only reads the live one),
// and the maps and lists on the way to a number to make plain: the rest is shared with obj.
func managedCopy(k *kinds.Kind, obj map[string]any) map[string]any {
	v, copied := plainShared(obj)
	cp := v.(map[string]any)
	if !copied {
		cp = maps.Clone(cp)
	}
	for _, f := range k.ManagedExtensions {
		delete(cp, f)
	}
	if md, ok := cp["metadata"].(map[string]any); ok {
		md = maps.Clone(md)
		for k, v := range md {
			if v == nil {
				delete(md, k)
			}
		}
		cp["metadata"] = md
	}
	if k.ManagedView != nil {
		k.ManagedView(cp)
	}
	return cp
}

// plainShared is plainValue copying only the maps and lists on the way to a number it makes
// plain (copied true when v itself is new); the rest is v's, shared.
func plainShared(v any) (_ any, copied bool) {
	return jsontree.Rewrite(v, func(v any) (any, bool) {
		switch v.(type) {
		case nil, string, bool, int64, float64:
			return v, false
		}
		return plainValue(v), true
	})
}

// setManagedFieldsOf sets obj's metadata.managedFields to those of from, the field manager's
// answer (none: removed).
func setManagedFieldsOf(obj, from map[string]any) {
	if managed := metadataOf(from)["managedFields"]; managed != nil {
		metadataOf(obj)["managedFields"] = managed
	} else {
		delete(metadataOf(obj), "managedFields")
	}
}

// writeManager names the manager of a write (managerOrUserAgent), "unknown" when neither names
// one.
func writeManager(o Options) string {
	if m := managerOrUserAgent(o.FieldManager, o.UserAgent); m != "" {
		return m
	}
	return "unknown"
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

// plainNumbers returns a copy of m with json.Number values (and the Go ints and float32 of an
// in-process writer's map) as int64 or float64, the number types structured-merge-diff and
// runtime.DeepCopyJSON understand.
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
	case nil, string, bool, int64, float64:
		return v
	}
	// Go numbers an in-process writer put in its map (opemu's own clients build objects so).
	switch r := reflect.ValueOf(v); r.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32:
		return r.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		if u := r.Uint(); u <= math.MaxInt64 {
			return int64(u)
		}
		return float64(r.Uint())
	case reflect.Float32:
		return r.Float()
	}
	return v
}

// unstructuredConvertor converts nothing but an object's apiVersion and kind: every served
// version shares one stored form.
type unstructuredConvertor struct{}

func (unstructuredConvertor) Convert(in, out, _ any) error {
	return fmt.Errorf("server: conversion is not supported")
}

func (unstructuredConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("server: cannot convert %T", in)
	}
	target, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()})
	if !ok || target == u.GroupVersionKind() {
		// In place, as kube-apiserver's field managers convert (its UnsafeConvertor): they
		// read what they convert and never change it.
		return in, nil
	}
	out := u.DeepCopy()
	out.SetGroupVersionKind(target)
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

// TrackAnswer records in obj, what a create of t.Kind answers without storing it (an access
// or token review, a TokenRequest), decoded and defaulted, the managedFields kube-apiserver's
// create handler records for every create, stored or not: its fields are the write's
// manager's (its field manager, or its user agent), an Update with t.Sub as its subresource.
// zero is the kind's Go zero value, the object a create is compared with; the kind's types are
// deduced from the objects (t.Kind.TypeConverter is not used), which for these kinds, without
// keyed lists, are the field sets of their Go types. An object that cannot be tracked is left
// as it is.
func (s *Store) TrackAnswer(t Target, zero runtime.Object, obj map[string]any, o Options) {
	fm, err := s.newFieldManager(t.Kind, t.Sub, nil, false)
	if err != nil {
		return
	}
	empty, err := runtime.DefaultUnstructuredConverter.ToUnstructured(zero)
	if err != nil {
		return
	}
	empty["apiVersion"], empty["kind"] = t.Kind.GroupVersion(), t.Kind.Kind
	out := fm.UpdateNoErrors(&unstructured.Unstructured{Object: empty}, &unstructured.Unstructured{Object: plainNumbers(obj)}, writeManager(o))
	setManagedFieldsOf(obj, out.(*unstructured.Unstructured).Object)
}
