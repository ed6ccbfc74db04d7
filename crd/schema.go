package crd

import (
	"context"
	"encoding/json"
	"sort"
	"sync"

	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/opemu/opemu/kinds"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structurallisttype "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/listtype"
	schemaobjectmeta "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/objectmeta"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/warning"
)

// schema is one version's schema: the kinds.Schema of that version's Kind. Its objects are
// pruned, defaulted and validated by apiextensions-apiserver's own code, arranged as
// kube-apiserver's custom resource handler and strategies arrange it (pkg/apiserver's
// unstructuredSchemaCoercer and unstructuredDefaulter, pkg/registry/customresource's
// Validate, ValidateUpdate and the status strategy's ValidateUpdate): structural pruning,
// defaulting, the OpenAPI schema validator (with ratcheting on updates), the metadata of
// embedded resources, list-type sets and maps, and x-kubernetes-validations evaluated by the
// CEL validator with the runtime cost budget, transition rules and ratcheting.
//
// It is compiled once: a client's CRD when it is registered, a built-in CRD (known to be
// valid) on first use, so start-up does not pay for it. CEL programs are compiled with the
// rest, only when the schema has rules. What only objects the quick check does not vouch for
// need (the OpenAPI validators, and the structural schema when no CEL rule, embedded resource
// or list-type set or map needs it on every write) is made on first use, so a served CRD keeps
// about 8 times its size as JSON instead of 25 (BenchmarkRegisterWideCRDs).
type schema struct {
	props *apiextv1.JSONSchemaProps
	// scale is the version's scale subresource (nil: none): its replicas paths are checked as
	// kube-apiserver's validator checks them.
	scale      *apiextv1.CustomResourceSubresourceScale
	scalePaths *scalePaths

	once sync.Once
	c    *compiled
	err  error // from a lazy compile (a built-in schema that does not compile: a bug)
}

// compiled is what a schema is compiled into. It is never modified once made.
type compiled struct {
	// structural returns the structural schema (structuralOf): kept when the checks of every
	// write need it (CEL rules, embedded resources, list-type sets and maps), else made again
	// on first use (the ratcheting of an update the quick check does not vouch for). It is the
	// largest part of a compiled schema.
	structural func() (*structuralschema.Structural, error)
	// prune and fill are the structural schema compiled for the walks of pruning and of
	// defaulting (structural_fast.go); fill's defaults are json.Number, the form objects are
	// decoded into here, and it is prune when the schema has no defaults.
	prune, fill *node
	// validators holds the OpenAPI schema validator and, for /status writes, one of the
	// status property alone, made on first use: objects that quick vouches for never need
	// them, and they are a third of what a compiled schema keeps.
	validators func() (validators, error)
	// cel evaluates the x-kubernetes-validations rules; nil when there are none.
	cel *cel.Validator
	// quick vouches for the usual objects before the validator is asked (schema_fast.go).
	quick *quick
	// embedded and listTypes say the schema has x-kubernetes-embedded-resource and
	// x-kubernetes-list-type set or map somewhere: only then are they looked for in objects.
	embedded, listTypes bool
}

var (
	_ kinds.Schema       = (*schema)(nil)
	_ kinds.UpdateSchema = (*schema)(nil)
)

// OpenAPI returns the schema as the CRD gives it.
func (s *schema) OpenAPI() *apiextv1.JSONSchemaProps { return s.props }

// newSchema returns props compiled now, or, when lazy, on first use.
func newSchema(props *apiextv1.JSONSchemaProps, scale *apiextv1.CustomResourceSubresourceScale, lazy bool) (*schema, error) {
	s := &schema{props: props, scale: scale, scalePaths: splitScale(scale)}
	if !lazy {
		s.once.Do(s.compile)
	}
	return s, s.err
}

// compiled returns the compiled schema, compiling it on first use.
func (s *schema) compiled() (*compiled, error) {
	s.once.Do(s.compile)
	return s.c, s.err
}

func (s *schema) compile() { s.c, s.err = compileSchema(s.props) }

// compileSchema compiles props as kube-apiserver's custom resource handler does for a version.
func compileSchema(props *apiextv1.JSONSchemaProps) (*compiled, error) {
	ss, err := structuralOf(props)
	if err != nil {
		return nil, err
	}
	c := &compiled{}
	c.prune = compileNode(ss)
	c.fill = c.prune
	if hasDefaults(ss) {
		// Only a schema with defaults needs a copy of itself whose defaults are json.Number.
		defaults := ss.DeepCopy()
		numbersOfDefaults(defaults)
		c.fill = compileNode(defaults)
	}
	c.validators = sync.OnceValues(func() (validators, error) { return newValidators(props) })
	c.cel = cel.NewValidator(ss, true, celconfig.PerCallLimit)
	c.embedded, c.listTypes = hasEmbeddedAndListTypes(ss)
	if c.cel != nil || c.embedded || c.listTypes {
		c.structural = func() (*structuralschema.Structural, error) { return ss, nil }
	} else {
		c.structural = sync.OnceValues(func() (*structuralschema.Structural, error) { return structuralOf(props) })
	}
	raw, err := json.Marshal(props)
	if err != nil {
		return nil, err
	}
	doc, err := jsonfast.Decode(raw)
	if err != nil {
		return nil, err
	}
	c.quick = compileQuick(translate(doc))
	return c, nil
}

// structuralOf is the structural schema of props with its defaults pruned, as kube-apiserver
// serves custom resources with.
func structuralOf(props *apiextv1.JSONSchemaProps) (*structuralschema.Structural, error) {
	in := &apiextensions.JSONSchemaProps{}
	if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, in, nil); err != nil {
		return nil, err
	}
	ss, err := structuralschema.NewStructural(in)
	if err != nil {
		return nil, err
	}
	if err := structuraldefaulting.PruneDefaults(ss); err != nil {
		return nil, err
	}
	return ss, nil
}

// validators are the OpenAPI schema validators of a schema: of the whole object, and of its
// status property alone (nil when it has none).
type validators struct {
	object, status apiservervalidation.SchemaValidator
}

// newValidators makes the validators of props.
func newValidators(props *apiextv1.JSONSchemaProps) (validators, error) {
	in := &apiextensions.JSONSchemaProps{}
	if err := apiextv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(props, in, nil); err != nil {
		return validators{}, err
	}
	var v validators
	var err error
	if v.object, _, err = apiservervalidation.NewSchemaValidator(in); err != nil {
		return validators{}, err
	}
	if st, ok := in.Properties["status"]; ok {
		if v.status, _, err = apiservervalidation.NewSchemaValidator(&st); err != nil {
			return validators{}, err
		}
	}
	return v, nil
}

// hasDefaults reports whether s has a default anywhere.
func hasDefaults(s *structuralschema.Structural) bool {
	if s == nil {
		return false
	}
	if s.Default.Object != nil {
		return true
	}
	for _, p := range s.Properties {
		if hasDefaults(&p) {
			return true
		}
	}
	return s.AdditionalProperties != nil && hasDefaults(s.AdditionalProperties.Structural) || hasDefaults(s.Items)
}

// hasEmbeddedAndListTypes reports whether s has an embedded resource, and a list-type set or
// map, anywhere.
func hasEmbeddedAndListTypes(s *structuralschema.Structural) (embedded, listTypes bool) {
	var walk func(s *structuralschema.Structural)
	walk = func(s *structuralschema.Structural) {
		if s == nil {
			return
		}
		embedded = embedded || s.XEmbeddedResource
		if t := s.XListType; t != nil && (*t == "set" || *t == "map") {
			listTypes = true
		}
		for _, p := range s.Properties {
			walk(&p)
		}
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Structural)
		}
		walk(s.Items)
	}
	walk(s)
	return embedded, listTypes
}

// numbersOfDefaults rewrites the numbers of s's defaults (int64 and float64, as the CRD's JSON
// decodes) into json.Number, the form objects hold here, so a defaulted field is stored and
// compared like a field sent by the client.
func numbersOfDefaults(s *structuralschema.Structural) {
	if s == nil {
		return
	}
	if s.Default.Object != nil {
		s.Default.Object = toJSONNumbers(s.Default.Object)
	}
	for k, p := range s.Properties {
		numbersOfDefaults(&p)
		s.Properties[k] = p
	}
	if s.AdditionalProperties != nil {
		numbersOfDefaults(s.AdditionalProperties.Structural)
	}
	numbersOfDefaults(s.Items)
}

// ctx is the context of the validators' calls: they read nothing from it but cancellation
// (the runtime cost budget bounds CEL) and a warning recorder (updates give one).
var ctx = context.Background()

// Prune removes, in place, every field the structural schema does not know (apiextensions'
// pruning, metadata and embedded resources' type and object meta kept) and returns their
// dotted paths, sorted ("spec.foo", "spec.items[0].x"); then it removes nulls the schema does
// not allow where no default will replace them, coerces the metadata of embedded resources,
// and writes every number as kube-apiserver's decoding would (canonicalNumbers). The walks
// are structural_fast.go's, held to apiextensions' by FuzzPruneDefault.
func (s *schema) Prune(obj map[string]any) []string {
	c, err := s.compiled()
	if err != nil {
		return nil
	}
	unknown := pruneRoot(obj, c.prune)
	pruneNulls(obj, c.prune)
	if c.embedded {
		ss, _ := c.structural() // kept: never an error
		// An error here is invalid metadata of an embedded resource, which validation reports.
		_, paths := schemaobjectmeta.CoerceWithOptions(nil, obj, ss, false, schemaobjectmeta.CoerceOptions{ReturnUnknownFieldPaths: true})
		if len(paths) > 0 {
			unknown = append(unknown, paths...)
			sort.Strings(unknown)
		}
	}
	canonicalNumbers(obj)
	return unknown
}

// Default applies the schema's defaults in place (apiextensions' defaulting: missing fields,
// and nulls the schema does not allow, get a copy of their default; structural_fast.go).
func (s *schema) Default(obj map[string]any) {
	c, err := s.compiled()
	if err != nil {
		return
	}
	applyDefaults(obj, c.fill)
}

// Validate checks a new object, as kube-apiserver's custom resource strategy's Validate does
// (its metadata excepted: the write path checks it).
func (s *schema) Validate(obj map[string]any) field.ErrorList {
	c, err := s.compiled()
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	valid := c.quick.valid(obj)
	if valid && s.quicklyScaled(obj) && c.cel == nil && !c.embedded && !c.listTypes {
		return nil
	}
	ss, err := c.structural()
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	u := toUnstructured(obj).(map[string]any)
	var errs field.ErrorList
	if !valid {
		v, err := c.validators()
		if err != nil {
			return field.ErrorList{field.InternalError(nil, err)}
		}
		errs = sortedByField(apiservervalidation.ValidateCustomResource(nil, u, v.object))
	}
	errs = append(errs, validateScaleSpec(u, s.scale)...)
	errs = append(errs, validateScaleStatus(u, s.scale)...)
	if c.embedded {
		errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u, ss, false)...)
	}
	if c.listTypes {
		errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, ss, u)...)
	}
	return append(errs, c.validateRules(ctx, ss, u, nil, errs)...)
}

// ValidateUpdate checks obj replacing old, as kube-apiserver's custom resource strategy's
// ValidateUpdate does, or its status strategy's for sub "status" (only status against the
// schema): with ratcheting (a value unchanged from old is not refused for the schema's rules;
// a rule it breaks is a warning) and with old as oldSelf in transition rules.
func (s *schema) ValidateUpdate(obj, old map[string]any, sub string) (field.ErrorList, []string) {
	c, err := s.compiled()
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}, nil
	}
	valid := c.quick.valid(obj)
	if valid && s.quicklyScaled(obj) && c.cel == nil && !c.listTypes && (!c.embedded || sub == "status") {
		return nil, nil
	}
	ss, err := c.structural()
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}, nil
	}
	u := toUnstructured(obj).(map[string]any)
	uOld := toUnstructured(old).(map[string]any)
	correlated := common.NewCorrelatedObject(u, uOld, &model.Structural{Structural: ss})
	var v validators
	if !valid {
		if v, err = c.validators(); err != nil {
			return field.ErrorList{field.InternalError(nil, err)}, nil
		}
	}
	var errs field.ErrorList
	if sub == "status" {
		if st, ok := u["status"]; ok && !valid {
			errs = sortedByField(apiservervalidation.ValidateCustomResourceUpdate(field.NewPath("status"), st, uOld["status"], v.status,
				apiservervalidation.WithRatcheting(correlated.Key("status"))))
		}
		errs = append(errs, validateScaleStatus(u, s.scale)...)
		if c.listTypes {
			if newErrs := structurallisttype.ValidateListSetsAndMaps(nil, ss, u); len(newErrs) > 0 &&
				len(structurallisttype.ValidateListSetsAndMaps(nil, ss, uOld)) == 0 {
				errs = append(errs, newErrs...)
			}
		}
	} else {
		if !valid {
			errs = sortedByField(apiservervalidation.ValidateCustomResourceUpdate(nil, u, uOld, v.object, apiservervalidation.WithRatcheting(correlated)))
		}
		errs = append(errs, validateScaleSpec(u, s.scale)...)
		errs = append(errs, validateScaleStatus(u, s.scale)...)
		if c.embedded {
			errs = append(errs, schemaobjectmeta.Validate(ctx, nil, u, ss, false)...)
		}
		if c.listTypes && len(structurallisttype.ValidateListSetsAndMaps(nil, ss, uOld)) == 0 {
			errs = append(errs, structurallisttype.ValidateListSetsAndMaps(nil, ss, u)...)
		}
	}
	var warnings warnings
	errs = append(errs, c.validateRules(warning.WithWarningRecorder(ctx, &warnings), ss, u, uOld, errs, cel.WithRatcheting(correlated))...)
	return errs, warnings
}

// warnings collects the CEL validator's warnings (warning.Recorder).
type warnings []string

func (w *warnings) AddWarning(_, text string) { *w = append(*w, text) }

// validateRules evaluates the x-kubernetes-validations rules of ss on u (old: uOld, nil on create)
// within the runtime cost budget, unless errs has an error that makes rules meaningless (a
// missing field, a value of the wrong type or over a length limit), as the strategy does.
func (c *compiled) validateRules(ctx context.Context, ss *structuralschema.Structural, u, uOld map[string]any, errs field.ErrorList, opts ...cel.Option) field.ErrorList {
	if c.cel == nil {
		return nil
	}
	for _, e := range errs {
		switch e.Type {
		case field.ErrorTypeNotSupported, field.ErrorTypeRequired, field.ErrorTypeTooLong, field.ErrorTypeTooMany, field.ErrorTypeTypeInvalid:
			return field.ErrorList{field.Invalid(nil, nil, "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation")}
		}
	}
	var oldObj any
	if uOld != nil {
		oldObj = uOld
	}
	ruleErrs, _ := c.cel.Validate(ctx, nil, ss, u, oldObj, celconfig.RuntimeCELCostBudget, opts...)
	return ruleErrs
}

// sortedByField orders the schema validator's errors by field: it finds them walking maps, in
// no set order.
func sortedByField(errs field.ErrorList) field.ErrorList {
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}
