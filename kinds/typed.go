package kinds

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/opemu/opemu/cache"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/deprecation"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Kinds served from their Go types (k8s.io/api, registered in client-go's scheme): one line in
// served.go each. The Go type gives everything: the group, version and kind (from the scheme),
// pruning of unknown fields, required fields, types and descriptions for validation and
// OpenAPI, strategic merge patches, protobuf bodies, and, through the structured-merge-diff
// schema that ships with client-go, server-side apply with the real list and map keys. The
// line adds what the type cannot say: scope, short names, the status and scale subresources,
// the "all" category, columns, selectable fields, and the kind's defaults and checks.
//
// Registering a kind reads nothing of its type but its place in the scheme: the type is walked
// on the first write or OpenAPI request, so serving 23 kinds costs almost nothing at start.

// typed is one line of served.go.
type typed struct {
	obj     runtime.Object // a pointer to the Go type, e.g. &appsv1.Deployment{}
	cluster bool           // cluster-scoped
	plural  string         // when not the guess from the kind ("endpoints")
	short   []string
	all     bool // in the "all" category (`kubectl get all`)
	status  bool // the status subresource
	// statusResets are what a write to /status does not change besides spec (Kind.StatusResets).
	statusResets []string
	// statusOnCreate keeps the status a create sends (Kind.StatusOnCreate).
	statusOnCreate bool
	// finalize is spec.finalizers and the finalize subresource (Kind.Finalize).
	finalize bool
	// labelsGeneration moves generation on a change of labels (Kind.LabelsGeneration).
	labelsGeneration bool
	// scale is the scale subresource over spec.replicas, status.replicas and spec.selector.
	scale   bool
	columns []Column
	fields  []Field
	// defaults fills what Kubernetes' defaulting fills, on every write (as decoding does); it
	// gets a pointer to the Go type.
	defaults func(any)
	// validate checks what Kubernetes' validation checks beyond types and required fields;
	// validateCreate what it checks of new objects only.
	validate       func(any) field.ErrorList
	validateCreate func(any) field.ErrorList
	// validateUpdate checks what may not change (immutable fields), after validate; it gets
	// pointers to the new and the old object's Go types.
	validateUpdate func(obj, old any) field.ErrorList
	// warnings are what kube-apiserver warns about in an object it accepts.
	warnings         func(any) []string
	prepareForCreate func(obj map[string]any)
	prepareForUpdate func(obj, old map[string]any)
	// managedView is the Kind's ManagedView.
	managedView func(obj map[string]any)
	// afterStamp is the Kind's PrepareStamped.
	afterStamp   func(obj map[string]any)
	canonicalize func(obj map[string]any)
	// The strategy's and store's capabilities (Kind's fields of the same names).
	nameRule          func(name string, prefix bool) []string
	createOnUpdate    bool
	returnDeleted     bool
	gracePeriod       func(obj map[string]any, requested *int64) int64
	schedulable       bool
	deletePropagation metav1.DeletionPropagation
	deleteWarning     string
	// extension puts the kind in the "api-extensions" category (what extends the API:
	// admission webhooks), as kube-apiserver does.
	extension bool
}

// defaulter adapts a function of one Go type to typed.defaults.
func defaulter[T any](f func(*T)) func(any) { return func(v any) { f(v.(*T)) } }

// validator adapts a function of one Go type to typed.validate.
func validator[T any](f func(*T) field.ErrorList) func(any) field.ErrorList {
	return func(v any) field.ErrorList { return f(v.(*T)) }
}

// warner adapts a function of one Go type to typed.warnings.
func warner[T any](f func(*T) []string) func(any) []string {
	return func(v any) []string { return f(v.(*T)) }
}

// updateValidator adapts a function of one Go type to typed.validateUpdate.
func updateValidator[T any](f func(obj, old *T) field.ErrorList) func(obj, old any) field.ErrorList {
	return func(obj, old any) field.ErrorList { return f(obj.(*T), old.(*T)) }
}

// kind makes the Kind of one line.
func (ts *typeSet) kind(d typed) *Kind {
	gvks, _, err := clientgoscheme.Scheme.ObjectKinds(d.obj)
	if err != nil || len(gvks) == 0 {
		panic(fmt.Sprintf("kinds: %T is not in client-go's scheme", d.obj)) // the table is a constant
	}
	gvk := gvks[0]
	t := reflect.TypeOf(d.obj).Elem()
	lower := strings.ToLower(gvk.Kind)
	plural := d.plural
	if plural == "" {
		plural = guessPlural(lower)
	}
	k := &Kind{
		Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, ListKind: gvk.Kind + "List",
		Plural: plural, Singular: lower, ShortNames: d.short, Namespaced: !d.cluster,
		Status:           d.status,
		StatusOnCreate:   d.statusOnCreate,
		Finalize:         d.finalize,
		LabelsGeneration: d.labelsGeneration,
		Schema:           &typedSchema{ts: ts, t: t, defaults: d.defaults, validate: d.validate, validateCreate: d.validateCreate, validateUpdate: d.validateUpdate, warnings: d.warnings},
		Columns:          d.columns,
		StrategicPatch:   d.obj,
		Fields:           d.fields,
		Protobuf:         true,
		PrepareForCreate: d.prepareForCreate,
		PrepareForUpdate: d.prepareForUpdate,
		PrepareStamped:   d.afterStamp,
		ManagedView:      d.managedView,
		Canonicalize:     d.canonicalize,
		TypeConverter:    ts.smd.converter(),

		NameRule:            d.nameRule,
		AllowCreateOnUpdate: d.createOnUpdate,
		ReturnDeletedObject: d.returnDeleted,
		GracePeriod:         d.gracePeriod,
		Schedulable:         d.schedulable,
		DeletePropagation:   d.deletePropagation,
		DeleteWarning:       d.deleteWarning,
		Warning:             deprecation.WarningMessage(withKind(d.obj, gvk)),
	}
	if d.all {
		k.Categories = []string{"all"}
	}
	if d.extension {
		k.Categories = append(k.Categories, "api-extensions")
	}
	if d.status {
		k.StatusResets = append([]string{"spec"}, d.statusResets...)
	}
	if d.scale {
		selector := ".spec.selector"
		k.Scale = &apiextv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas", LabelSelectorPath: &selector}
	}
	return k
}

// withKind returns a copy of obj with its apiVersion and kind set to gvk.
func withKind(obj runtime.Object, gvk schema.GroupVersionKind) runtime.Object {
	c := obj.DeepCopyObject()
	c.GetObjectKind().SetGroupVersionKind(gvk)
	return c
}

// guessPlural is the resource name Kubernetes' convention gives a lower-cased kind.
func guessPlural(s string) string {
	switch {
	case strings.HasSuffix(s, "s"), strings.HasSuffix(s, "x"), strings.HasSuffix(s, "ch"), strings.HasSuffix(s, "sh"):
		return s + "es"
	case strings.HasSuffix(s, "y") && !strings.ContainsAny(s[len(s)-2:len(s)-1], "aeiou"):
		return s[:len(s)-1] + "ies"
	}
	return s + "s"
}

// typedSchema is the Schema of a kind served from its Go type. Its goType is read on first
// use, so serving a kind costs nothing until its objects are written.
type typedSchema struct {
	ts       *typeSet
	t        reflect.Type // the struct type
	defaults func(any)
	validate func(any) field.ErrorList
	// validateCreate checks new objects only, beyond validate.
	validateCreate func(any) field.ErrorList
	// validateUpdate checks changes (immutable fields) beyond validate.
	validateUpdate func(obj, old any) field.ErrorList
	warnings       func(any) []string

	once sync.Once
	g    *goType
}

var _ Schema = (*typedSchema)(nil)

func (s *typedSchema) goType() *goType {
	s.once.Do(func() { s.g = s.ts.of(s.t) })
	return s.g
}

// Prune removes, in place, every field the Go type does not have, and returns their paths.
func (s *typedSchema) Prune(obj map[string]any) []string {
	var unknown []string
	pruneValue(obj, s.goType(), "", &unknown)
	sort.Strings(unknown)
	return unknown
}

func pruneValue(v any, g *goType, path string, unknown *[]string) {
	switch g.kind {
	case kindObject:
		m, ok := v.(map[string]any)
		if !ok {
			return
		}
		for k, e := range m {
			f, ok := g.fields[k]
			if !ok {
				delete(m, k)
				*unknown = append(*unknown, childPath(path, k))
				continue
			}
			pruneValue(e, f.typ, childPath(path, k), unknown)
		}
	case kindArray:
		l, _ := v.([]any)
		for i, e := range l {
			pruneValue(e, g.elem, path+"["+strconv.Itoa(i)+"]", unknown)
		}
	case kindMap:
		m, _ := v.(map[string]any)
		for k, e := range m {
			pruneValue(e, g.elem, childPath(path, k), unknown)
		}
	}
}

// childPath is the dotted path of key below path, keys holding dots or brackets quoted.
func childPath(path, key string) string {
	if strings.ContainsAny(key, ".[]") {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

// Default decodes obj into its Go type, applies the kind's defaults and writes the result back
// into obj, which so takes the shape Kubernetes stores (the Go type's encoding). An object that
// does not decode is left alone; Validate reports why.
func (s *typedSchema) Default(obj map[string]any) {
	v, err := s.decode(obj)
	if err != nil {
		return
	}
	if s.defaults != nil {
		s.defaults(v)
	}
	dropEmpty(reflect.ValueOf(v))
	raw, err := json.Marshal(v)
	if err != nil {
		return
	}
	out, err := cache.DecodeJSON(raw)
	if err != nil {
		return
	}
	clear(obj)
	for k, e := range out {
		obj[k] = e
	}
}

// dropEmpty makes every empty list and map below v nil, as kube-apiserver's protobuf storage
// does to built-in objects (an empty repeated field is stored as none): so an object is stored,
// and answered, with "rules": null or no "labels" where it was sent with [] or {}. Byte
// strings are left alone.
func dropEmpty(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			dropEmpty(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if f := v.Field(i); f.CanSet() {
				dropEmpty(f)
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		if v.Len() == 0 {
			if !v.IsNil() && v.CanSet() {
				v.SetZero()
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			dropEmpty(v.Index(i))
		}
	case reflect.Map:
		if v.Len() == 0 {
			if !v.IsNil() && v.CanSet() {
				v.SetZero()
			}
			return
		}
		if k := v.Type().Elem().Kind(); k == reflect.Struct || k == reflect.Pointer || k == reflect.Slice || k == reflect.Map || k == reflect.Interface {
			// Map values cannot be set in place: only the values' own pointers are walked.
			for _, key := range v.MapKeys() {
				if e := v.MapIndex(key); e.Kind() == reflect.Pointer {
					dropEmpty(e)
				}
			}
		}
	}
}

func (s *typedSchema) decode(obj map[string]any) (any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	v := reflect.New(s.t).Interface()
	return v, json.Unmarshal(raw, v)
}

// Validate checks that obj decodes into its Go type, holds every required field, and passes
// the kind's own checks. metadata is validated by the write path.
func (s *typedSchema) Validate(obj map[string]any) field.ErrorList {
	v, errs := s.check(obj)
	if v != nil && s.validateCreate != nil {
		errs = append(errs, s.validateCreate(v)...)
	}
	return errs
}

// ValidateUpdate is Validate, then the kind's rules on changes from old (immutable fields),
// which only a change outside metadata and status can break: an update of metadata alone
// decodes nothing more. It warns of nothing; sub does not matter.
func (s *typedSchema) ValidateUpdate(obj, old map[string]any, _ string) (field.ErrorList, []string) {
	v, errs := s.check(obj)
	if v == nil || s.validateUpdate == nil || cache.SameSpec(obj, old) {
		return errs, nil
	}
	o, err := s.decode(old)
	if err != nil {
		return errs, nil // stored before the kind had its type's rules: nothing to compare with
	}
	return append(errs, s.validateUpdate(v, o)...), nil
}

// Warnings returns what kube-apiserver warns about in obj, an object that passed validation
// (nothing for most kinds, which decode nothing for it).
func (s *typedSchema) Warnings(obj map[string]any) []string {
	if s.warnings == nil {
		return nil
	}
	v, err := s.decode(obj)
	if err != nil {
		return nil
	}
	return s.warnings(v)
}

// check is Validate, returning obj decoded too (nil when it does not decode).
func (s *typedSchema) check(obj map[string]any) (any, field.ErrorList) {
	v, err := s.decode(obj)
	if err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return nil, field.ErrorList{&field.Error{Type: field.ErrorTypeTypeInvalid, Field: te.Field, BadValue: te.Value, Detail: "must be of type " + jsonTypeName(te.Type)}}
		}
		if errs := locate(obj, s.goType(), nil); len(errs) > 0 {
			return nil, errs
		}
		return nil, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), stringAt(obj, "metadata.name"), "the object cannot be decoded: "+err.Error())}
	}
	var errs field.ErrorList
	g := s.goType()
	for _, name := range g.order {
		if name == "metadata" || name == "status" {
			continue
		}
		errs = append(errs, checkRequired(obj[name], g.fields[name], field.NewPath(name))...)
	}
	if s.validate != nil {
		own := s.validate(v)
		if len(errs) > 0 && len(own) > 0 {
			// A required pointer the kind's own rule reports too is reported once, in the
			// rule's words ("pathType must be specified").
			errs = slices.DeleteFunc(errs, func(e *field.Error) bool {
				return e.Type == field.ErrorTypeRequired && slices.ContainsFunc(own, func(o *field.Error) bool {
					return o.Type == field.ErrorTypeRequired && o.Field == e.Field
				})
			})
		}
		errs = append(errs, own...)
	}
	return v, errs
}

// locate finds the values that do not decode into their special Go types (a Quantity, a time,
// an int-or-string), which encoding/json reports without a path.
func locate(v any, g *goType, p *field.Path) field.ErrorList {
	switch g.kind {
	case kindObject:
		m, _ := v.(map[string]any)
		var errs field.ErrorList
		for _, name := range g.order {
			if e, ok := m[name]; ok {
				errs = append(errs, locate(e, g.fields[name].typ, p.Child(name))...)
			}
		}
		return errs
	case kindArray:
		l, _ := v.([]any)
		var errs field.ErrorList
		for i, e := range l {
			errs = append(errs, locate(e, g.elem, p.Index(i))...)
		}
		return errs
	case kindMap:
		m, _ := v.(map[string]any)
		var errs field.ErrorList
		for k, e := range m {
			errs = append(errs, locate(e, g.elem, p.Key(k))...)
		}
		return errs
	case kindQuantity, kindTime, kindDuration, kindIntOrString:
		raw, err := json.Marshal(v)
		if err == nil {
			err = json.Unmarshal(raw, reflect.New(g.t).Interface())
		}
		if err != nil {
			return field.ErrorList{field.Invalid(p, v, err.Error())}
		}
	}
	return nil
}

// checkRequired reports the required fields missing below v, the value of f (nil when absent
// or null).
//
// A field is checked when the Go type makes it a pointer without omitempty (a workload's
// selector, a webhook's sideEffects, an Ingress path's pathType): the types mark a field
// required by leaving omitempty out, but for values (strings, numbers, structs, lists) decoding
// turns an absent field into its zero value and Kubernetes accepts it (a StatefulSet's
// serviceName, a NetworkPolicy's podSelector, status counters), so only pointers say "must be
// given". Status is written by controllers and is not checked.
func checkRequired(v any, f *goField, p *field.Path) field.ErrorList {
	if v == nil {
		if f.required && f.pointer {
			return field.ErrorList{field.Required(p, "")}
		}
		return nil
	}
	var errs field.ErrorList
	g := f.typ
	switch g.kind {
	case kindObject:
		m, _ := v.(map[string]any)
		for _, name := range g.order {
			errs = append(errs, checkRequired(m[name], g.fields[name], p.Child(name))...)
		}
	case kindArray:
		l, _ := v.([]any)
		for i, e := range l {
			errs = append(errs, checkRequired(e, &goField{typ: g.elem}, p.Index(i))...)
		}
	case kindMap:
		m, _ := v.(map[string]any)
		for k, e := range m {
			errs = append(errs, checkRequired(e, &goField{typ: g.elem}, p.Key(k))...)
		}
	}
	return errs
}

// jsonTypeName names a Go type in a type error the way a JSON client thinks of it.
func jsonTypeName(t reflect.Type) string {
	if t == nil {
		return "unknown"
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Map, reflect.Struct:
		if t == timeType || t == microTimeType {
			return "string"
		}
		return "object"
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	}
	return t.String()
}

// OpenAPI returns the kind's schema as an apiextensions schema: its root only, with
// references to the named types. The full document comes from Definitions.
func (s *typedSchema) OpenAPI() *apiextv1.JSONSchemaProps {
	root, defs := s.Definitions()
	var props apiextv1.JSONSchemaProps
	_ = json.Unmarshal(defs[root], &props)
	return &props
}

// Definitions returns the OpenAPI v3 name of the kind's root schema and every named schema it
// refers to, its own included, as served in /openapi/v3 (the Definer capability).
func (s *typedSchema) Definitions() (root string, defs map[string]json.RawMessage) {
	g := s.goType()
	return g.name, s.ts.api.definitions(s.ts, g)
}

// Definer is implemented by schemas whose OpenAPI form refers to named definitions (kinds
// served from Go types): the server serves Definitions in place of OpenAPI, so `kubectl
// explain` shows type names (<DeploymentStrategy>) as on a real cluster.
type Definer interface {
	Definitions() (root string, defs map[string]json.RawMessage)
}
