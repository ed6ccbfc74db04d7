package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"

	"github.com/opemu/opemu/internal/jsonfast"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/mergepatch"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
)

// Patch media types.
const (
	jsonPatchType      = "application/json-patch+json"
	mergePatchType     = "application/merge-patch+json"
	applyPatchType     = "application/apply-patch+yaml"
	strategicPatchType = "application/strategic-merge-patch+json"
)

const customResourcePatchTypes = jsonPatchType + ", " + mergePatchType + ", " + applyPatchType

// Patch applies a JSON Patch, a JSON merge patch, a strategic merge patch (kinds with a Go
// type) or a server-side apply to t's object (or its /status or /scale view) through the
// update path, as kube-apiserver's patch handler does: a body that is not JSON is refused
// before the object is read; the patch is decoded (fieldValidation: what repeats or is unknown
// in it), applied, and what it made decoded as the kind's objects are (what repeats or is
// unknown there, a value its Go type cannot hold: a 422 quoting it) on every attempt of the
// update. The JSON Patch and merge patch are evanphx/json-patch's v4, kube-apiserver's.
// Result.Created says an apply created the object.
func (s *Store) Patch(ctx context.Context, t Target, patchType string, body []byte, o Options) (Result, error) {
	if o.Force && patchType != applyPatchType {
		return Result{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "",
			field.ErrorList{field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch")})
	}
	switch patchType {
	case applyPatchType:
		o.applying = true
		return s.applyPatch(ctx, t, body, o)
	case jsonPatchType, mergePatchType:
	case strategicPatchType:
		if t.Kind.StrategicPatch == nil {
			return Result{}, UnsupportedMediaType(customResourcePatchTypes)
		}
	default:
		return Result{}, UnsupportedMediaType(customResourcePatchTypes)
	}
	p := &patcher{s: s, t: t, typ: patchType, body: body, fieldValidation: o.FieldValidation}
	var valid bool
	p.parsed, p.repeats, valid = jsonfast.Parse(body)
	if !valid && !json.Valid(body) {
		return Result{}, badRequest("invalid JSON patch")
	}
	if ops, isList := p.parsed.([]any); isList && patchType == jsonPatchType {
		if err := checkJSONPatchSize(len(ops), 0); err != nil {
			return Result{}, err
		}
	}
	// After the body decoded (the decoder's own depth limit is a 400): +2 as a JSON Patch's list
	// of operations and each operation add two levels.
	if jsonDeeperThan(body, maxPatchDepth+2) {
		return Result{}, tooDeep(t, "the patch")
	}
	o.decoded, o.quote = fromPatch, p.quote
	if patchType == strategicPatchType {
		o.decoded = fromStrategicPatch
	}
	res, err := s.update(ctx, t, o, p.mutate)
	if err == nil {
		res.Warnings = append(p.warnings, res.Warnings...)
	}
	return res, err
}

// patcher is one patch request: the patch, decoded on the first attempt of the update, and
// what the last attempt made of it.
type patcher struct {
	s               *Store
	t               Target
	typ             string
	body            []byte
	fieldValidation string
	// parsed is the body as jsonfast read it (nil when it could not), repeats whether some
	// object in it repeats a field.
	parsed  any
	repeats bool

	decodedPatch bool
	ops          jsonpatch.Patch // a JSON Patch's operations
	patchMap     map[string]any  // a strategic merge patch
	strict       []error         // what repeats or is unknown in the patch itself

	// Of the last attempt: what a 422 quotes (the patched object, or the strategic merge patch
	// as applied), and fieldValidation=Warn's warnings.
	quoted   func() string
	warnings []string
}

// quote is what a 422 about the patch's result quotes.
func (p *patcher) quote() string {
	if p.quoted == nil {
		return ""
	}
	return p.quoted()
}

// mutate is the patch's MutateFunc: the current object (or its Scale) patched and decoded.
func (p *patcher) mutate(cur map[string]any) (map[string]any, error) {
	if err := p.decodePatch(); err != nil {
		return nil, err
	}
	p.warnings = nil
	t := p.t
	if t.Sub == "scale" {
		scale, err := p.patchDocument(t, scaleOf(t, cur), &autoscalingv1.Scale{})
		if err != nil {
			return nil, err
		}
		return fromScale(t, deepCopy(cur), scale)
	}
	if err := checkDepth(t, cur, "the object"); err != nil {
		return nil, err
	}
	return p.patchDocument(t, cur, t.Kind.StrategicPatch)
}

// patchDocument applies the patch to doc, which it does not modify, and decodes the result as
// an object of t (of the Go type of schemaRef for a strategic merge patch).
func (p *patcher) patchDocument(t Target, doc map[string]any, schemaRef any) (map[string]any, error) {
	if p.typ == strategicPatchType {
		return p.strategic(t, doc, schemaRef)
	}
	if patch, isObject := p.parsed.(map[string]any); isObject && p.typ == mergePatchType && !p.repeats {
		return p.mergeObject(t, doc, patch)
	}
	raw, err := jsonfast.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var out []byte
	if p.typ == jsonPatchType {
		if err := checkJSONPatchSize(len(p.ops), len(raw)); err != nil {
			return nil, err
		}
		if out, err = applyJSONPatch(p.ops, raw); err != nil {
			return nil, apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
		}
	} else {
		out, err = jsonpatch.MergePatch(raw, p.body)
		switch {
		case err == jsonpatch.ErrBadJSONPatch:
			return nil, apierrors.NewBadRequest(err.Error())
		case err != nil:
			return nil, serverError(err.Error())
		}
	}
	if err := p.checkPatchedSize(out); err != nil {
		return nil, err
	}
	p.quoted = func() string { return string(out) }
	var obj map[string]any
	if v, repeats, ok := jsonfast.Parse(out); ok && !repeats {
		obj, _ = v.(map[string]any)
	}
	return p.decodePatched(t, obj, out)
}

// mergeObject applies a merge patch that is an object without a repeated field (as jsonfast
// read it) to a copy of doc, on the decoded documents, with the answer of evanphx/json-patch's
// MergePatch on their encodings (mergeInto; FuzzMergeInto holds it to it): neither the object
// nor the patch is encoded for the library and the result decoded again.
func (p *patcher) mergeObject(t Target, doc, patch map[string]any) (map[string]any, error) {
	obj := mergeInto(deepCopy(doc), patch)
	out, err := jsonfast.Marshal(obj) // for the size limit and what a 422 quotes
	if err != nil {
		return nil, err
	}
	if err := p.checkPatchedSize(out); err != nil {
		return nil, err
	}
	p.quoted = func() string { return string(out) }
	return p.decodePatched(t, obj, out)
}

// checkPatchedSize refuses a patched object larger than the store takes from a patch.
func (p *patcher) checkPatchedSize(out []byte) error {
	if len(out) > p.s.maxPatchedBytes() {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the patched object is %d bytes; the limit is %d", len(out), p.s.maxPatchedBytes()))
	}
	return nil
}

// mergeInto merges patch into doc as RFC 7386 and evanphx/json-patch's MergePatch
// (kube-apiserver's) have it, and returns doc: a null removes the member, an object merges
// into an object, anything else replaces, and a value put in whole has its objects' nulls
// removed, except an array or scalar that replaces an object, which the library keeps as sent.
// doc is changed; patch is not, and the result shares nothing with it.
func mergeInto(doc, patch map[string]any) map[string]any {
	for k, v := range patch {
		if v == nil {
			delete(doc, k)
			continue
		}
		cur, ok := doc[k]
		curObject, isObject := cur.(map[string]any)
		switch patchObject, patchIsObject := v.(map[string]any); {
		case !ok || cur == nil || !isObject:
			doc[k] = pruneNulls(deepCopyValue(v))
		case !patchIsObject:
			doc[k] = deepCopyValue(v)
		default:
			doc[k] = mergeInto(curObject, patchObject)
		}
	}
	return doc
}

// pruneNulls removes the null members of every object in v, which it changes, and returns v.
func pruneNulls(v any) any {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if e == nil {
				delete(v, k)
			} else {
				v[k] = pruneNulls(e)
			}
		}
	case []any:
		for i, e := range v {
			v[i] = pruneNulls(e)
		}
	}
	return v
}

// decodePatched decodes out, the JSON a JSON Patch or merge patch made (obj: out as jsonfast
// read it, or nil when it could not or a field repeats), as kube-apiserver decodes it into the
// kind's objects: what repeats or is unknown in it reported with the patch's own as
// fieldValidation says, anything else it cannot decode a 422 quoting it.
func (p *patcher) decodePatched(t Target, obj map[string]any, out []byte) (map[string]any, error) {
	bt := bodyTypeOf(t)
	refuse := func(err error) error { return invalidPatchValue(string(out), err) }
	if obj != nil {
		if unknown, ok := vouch(t, bt, obj, p.fieldValidation); ok {
			return obj, p.outcome(append(p.strict, unknownFieldErrors(unknown)...), refuse)
		}
	}
	d, derr := decodeGeneral(t, bt, out, false, p.fieldValidation)
	if derr != nil {
		return nil, derr.patchError(string(out))
	}
	return d.obj, p.outcome(append(p.strict, d.strict...), refuse)
}

// outcome applies fieldValidation to the patch's strict errors errs, keeping Warn's warnings.
func (p *patcher) outcome(errs []error, refuse func(error) error) error {
	warnings, err := strictOutcome(p.fieldValidation, errs, refuse)
	p.warnings = warnings
	return err
}

// strategic applies a strategic merge patch to doc with the patch strategy of schemaRef's Go
// type and decodes the result into that type, as kube-apiserver does: the patch's own errors
// as its handler answers them, what the type cannot hold a 422 quoting the patch.
func (p *patcher) strategic(t Target, doc map[string]any, schemaRef any) (map[string]any, error) {
	if err := checkStrategicWidth(p.patchMap, doc); err != nil {
		return nil, err
	}
	patchMap := deepCopy(p.patchMap)
	patched, err := strategicpatch.StrategicMergeMapPatch(deepCopy(doc), patchMap, schemaRef)
	if err != nil {
		return nil, strategicPatchError(err)
	}
	p.quoted = func() string { return fmt.Sprintf("%+v", patchMap) }
	refuse := func(err error) error { return invalidPatchValue(p.quote(), err) }
	bt := bodyTypeOf(t)
	if _, ok := vouch(t, bt, patched, p.fieldValidation); ok {
		return patched, p.outcome(p.strict, refuse)
	}
	// vouch may have pruned it: the general way starts again from what the patch made.
	if patched, err = strategicpatch.StrategicMergeMapPatch(deepCopy(doc), deepCopy(p.patchMap), schemaRef); err != nil {
		return nil, strategicPatchError(err)
	}
	v := reflect.New(bt.goType).Interface().(runtime.Object)
	err = runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(plainNumbers(patched), v, p.fieldValidation != "Ignore")
	strict := p.strict
	if err != nil {
		se, isStrict := runtime.AsStrictDecodingError(err)
		if !isStrict {
			return nil, refuse(err)
		}
		strict = append(strict, se.Errors()...)
	}
	obj, err := roundTrip(v, bt.gvk)
	if err != nil {
		return nil, err
	}
	return obj, p.outcome(strict, refuse)
}

// applyJSONPatch applies ops to doc. The library panics on some operations on the root without
// a value (kube-apiserver's server then drops the request): that is an error here.
func applyJSONPatch(ops jsonpatch.Patch, doc []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("the JSON Patch cannot be applied: %v", r)
		}
	}()
	return ops.Apply(doc)
}

// strategicPatchError is kube-apiserver's answer to a strategic merge patch that cannot be
// applied: a 400 for a malformed patch, a 422 for one that does not fit the object, and what
// the library does not name a 500.
func strategicPatchError(err error) error {
	switch err {
	case mergepatch.ErrBadJSONDoc, mergepatch.ErrBadPatchFormatForPrimitiveList, mergepatch.ErrBadPatchFormatForRetainKeys,
		mergepatch.ErrBadPatchFormatForSetElementOrderList, mergepatch.ErrUnsupportedStrategicMergePatchFormat:
		return apierrors.NewBadRequest(err.Error())
	case mergepatch.ErrNoListOfLists, mergepatch.ErrPatchContentNotMatchRetainKeys:
		return apierrors.NewGenericServerResponse(http.StatusUnprocessableEntity, "", schema.GroupResource{}, "", err.Error(), 0, false)
	}
	return serverError(err.Error())
}

// decodePatch decodes the patch on the first attempt, as kube-apiserver's patchers do: with
// fieldValidation Warn or Strict by sigs.k8s.io/json's strict decoding (what repeats, or is
// unknown in a JSON Patch's operations), then by the patch library.
func (p *patcher) decodePatch() error {
	if p.decodedPatch {
		return nil
	}
	strict := p.fieldValidation != "Ignore"
	// A number kube-apiserver's decoding cannot keep: the general decoding refuses the patch.
	fit := numbersFit(p.parsed)
	switch p.typ {
	case jsonPatchType:
		if !fit || strict && !p.plainJSONPatch() {
			var ops []jsonPatchOp
			errs, err := kjson.UnmarshalStrict(p.body, &ops)
			if err != nil {
				// kube-apiserver's type of an operation is handlers.jsonPatchOp: its name is part
				// of the message.
				return badRequest("error decoding patch: %s", strings.ReplaceAll(err.Error(), "registry.jsonPatchOp", "handlers.jsonPatchOp"))
			}
			for _, e := range errs {
				p.strict = append(p.strict, fmt.Errorf("json patch %w", e))
			}
		}
		ops, err := jsonpatch.DecodePatch(p.body)
		if err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
		if err := checkJSONPatchSize(len(ops), 0); err != nil {
			return err
		}
		p.ops = ops
	case mergePatchType:
		if _, isObject := p.parsed.(map[string]any); !fit || strict && (!isObject || p.repeats) {
			errs, err := kjson.UnmarshalStrict(p.body, &map[string]any{})
			if err != nil {
				return badRequest("error decoding patch: %v", err)
			}
			p.strict = errs
		}
	case strategicPatchType:
		m, isObject := p.parsed.(map[string]any)
		if !isObject || !fit || strict && p.repeats {
			var err error
			var general map[string]any
			if strict || !fit {
				p.strict, err = kjson.UnmarshalStrict(p.body, &general)
			} else {
				err = kjson.UnmarshalCaseSensitivePreserveInts(p.body, &general)
			}
			if err != nil {
				return apierrors.NewBadRequest(err.Error())
			}
			m = map[string]any{} // null patches nothing
			if general != nil {
				if m, err = DecodeObject(p.body); err != nil {
					return err
				}
			}
		}
		p.patchMap = m
	}
	p.decodedPatch = true
	return nil
}

// jsonPatchOp is a JSON Patch operation as kube-apiserver's strict decoding reads it.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	From  string `json:"from"`
	Value any    `json:"value"`
}

// plainJSONPatch reports whether the JSON Patch, as jsonfast read it, is one strict decoding
// into jsonPatchOp finds nothing in: a list of objects of op, path, from (strings) and value,
// none repeated.
func (p *patcher) plainJSONPatch() bool {
	ops, ok := p.parsed.([]any)
	if !ok || p.repeats {
		return false
	}
	for _, e := range ops {
		op, ok := e.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range op {
			switch k {
			case "op", "path", "from":
				if _, isString := v.(string); !isString && v != nil {
					return false
				}
			case "value":
			default:
				return false
			}
		}
	}
	return true
}

// jsonPath splits a Kubernetes JSONPath like ".spec.replicas" into its keys.
func jsonPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

func setPath(obj map[string]any, path []string, v any) {
	m := obj
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}
