package registry

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

	"github.com/opemu/opemu/internal/jsonfast"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// How the body of a create or update is decoded, as kube-apiserver's decoders decode it: its
// apiVersion and kind (a built-in kind's taken from the URL when the body leaves them out), a
// repeated field keeping its last value (a built-in kind's objects merged as their Go types
// merge them), unknown fields dropped, and both reported as fieldValidation says (Warn: one
// warning each; Strict: a 400 listing them; Ignore: nothing). A body that is not an object of
// the URL's kind is refused with kube-apiserver's words. The usual body is vouched for by
// decodeFast (decode_fast.go); any other is decoded by apimachinery's JSON (or YAML) serializer
// over client-go's scheme, as kube-apiserver's is, which also words the errors.

// decodedBy says how a write's object came from its request (Options.decoded), so that the
// write path neither prunes it again nor words its decoding errors otherwise than
// kube-apiserver's decoder would.
type decodedBy uint8

const (
	// notDecoded: opemu's own writes; admission prunes unknown fields as fieldValidation says.
	notDecoded decodedBy = iota
	// fromBody: a create or update body (DecodeBody): a value its Go type cannot hold is a 400.
	fromBody
	// fromPatch: the object a JSON Patch or merge patch made: a 422 quoting the patched object.
	fromPatch
	// fromStrategicPatch: the object a strategic merge patch made: a 422 quoting the patch.
	fromStrategicPatch
	// fromApply: a server-side apply's result, which field management has checked.
	fromApply
)

// BodyFormat is the format of a create or update body (Content-Type).
type BodyFormat uint8

const (
	JSONBody BodyFormat = iota // application/json
	YAMLBody                   // application/yaml
)

// bodyType is what a body of t must be: the group, version and kind the URL names, and how
// their objects decode.
type bodyType struct {
	gvk schema.GroupVersionKind
	// goType is the Go type of a kind served from one (its objects decode into it); nil for
	// custom resources and the kinds served without one.
	goType reflect.Type
	// custom: a custom resource, decoded as unstructured (its kind required, its metadata
	// checked against ObjectMeta, its schema pruning unknown fields).
	custom bool
}

// bodyTypeOf returns the type a body written to t must have: for /scale an autoscaling/v1
// Scale, as kube-apiserver's scale subresources take for every kind.
func bodyTypeOf(t Target) bodyType {
	if t.Sub == "scale" {
		return bodyType{gvk: autoscalingv1.SchemeGroupVersion.WithKind("Scale"), goType: reflect.TypeFor[autoscalingv1.Scale]()}
	}
	bt := bodyType{gvk: schema.GroupVersionKind{Group: t.Kind.Group, Version: t.Kind.Version, Kind: t.Kind.Kind}, custom: !t.Kind.BuiltIn()}
	if p := t.Kind.StrategicPatch; p != nil {
		bt.goType = reflect.TypeOf(p).Elem()
	}
	return bt
}

// DecodeBody decodes the body of a create or update of t (of the given format) as
// kube-apiserver does, and marks o as decoded so that the write path does not prune the object
// again. The warnings are fieldValidation=Warn's, one per repeated or unknown field; kube-apiserver
// sends them whatever becomes of the write.
func DecodeBody(t Target, body []byte, format BodyFormat, o *Options) (map[string]any, []string, error) {
	o.decoded = fromBody
	bt := bodyTypeOf(t)
	if format == JSONBody {
		if obj, unknown, ok := decodeFast(t, bt, body, o.FieldValidation); ok {
			warnings, err := strictOutcome(o.FieldValidation, unknownFieldErrors(unknown), func(err error) error {
				return cannotHandle(bt.gvk, bt.gvk.Kind, err)
			})
			return obj, warnings, err
		}
	}
	d, derr := decodeGeneral(t, bt, body, format == YAMLBody, o.FieldValidation)
	if derr != nil {
		return nil, nil, derr.bodyError(bt, body)
	}
	// kube-apiserver checks a custom resource's version after decoding: Strict refuses first.
	warnings, err := strictOutcome(o.FieldValidation, d.strict, func(err error) error { return cannotHandle(d.gvk, bt.gvk.Kind, err) })
	if err == nil && bt.custom && d.gvk.GroupVersion() != bt.gvk.GroupVersion() {
		err = badRequest("the API version in the data (%s) does not match the expected API version (%v)", d.gvk.GroupVersion(), bt.gvk.GroupVersion())
	}
	if err != nil {
		return nil, warnings, err
	}
	return d.obj, warnings, nil
}

// decoded is a body decoded by decodeGeneral.
type decoded struct {
	obj map[string]any
	// gvk is what the body names (a built-in kind's defaults filled in).
	gvk schema.GroupVersionKind
	// strict are the repeated and unknown fields, as kube-apiserver lists them.
	strict []error
}

// decodeError is a body decodeGeneral refused: err as apimachinery words it, and the group,
// version and kind the body named (nil when it could not be read).
type decodeError struct {
	err error
	gvk *schema.GroupVersionKind
}

// bodyError is kube-apiserver's 400 for a create or update body it cannot decode
// (transformDecodeError): "<Kind> in version "<v>" cannot be handled as a <Kind>: ..." when the
// body named its kind, else "the object provided is unrecognized ...".
func (e *decodeError) bodyError(bt bodyType, body []byte) error {
	if e.gvk != nil && e.gvk.Kind != "" {
		return cannotHandle(*e.gvk, bt.gvk.Kind, e.err)
	}
	return badRequest("the object provided is unrecognized (must be of type %s): %v (%s)", bt.gvk.Kind, e.err, summarizeData(body, 30))
}

// patchError is kube-apiserver's 422 for a patched object it cannot decode: the field "patch",
// the value quoted.
func (e *decodeError) patchError(quoted string) error { return invalidPatchValue(quoted, e.err) }

// invalidPatchValue is the 422 of a patch whose result kube-apiserver refuses: no kind, no
// name, the field "patch" with the patched object (or a strategic merge patch) as its value.
func invalidPatchValue(quoted string, err error) error {
	return apierrors.NewInvalid(schema.GroupKind{}, "", field.ErrorList{field.Invalid(field.NewPath("patch"), quoted, err.Error())})
}

// cannotHandle is the 400 of a body of gvk that cannot be decoded as kind.
func cannotHandle(gvk schema.GroupVersionKind, kind string, err error) error {
	return badRequest("%s in version %q cannot be handled as a %s: %v", gvk.Kind, gvk.Version, kind, err)
}

// summarizeData is how kube-apiserver quotes a body it cannot read: the first 30 bytes, as
// text for an object, in hexadecimal otherwise.
func summarizeData(data []byte, maxLength int) string {
	switch {
	case len(data) == 0:
		return "<empty>"
	case data[0] == '{':
		if len(data) > maxLength {
			return string(data[:maxLength]) + " ..."
		}
		return string(data)
	default:
		if len(data) > maxLength {
			return hex.EncodeToString(data[:maxLength]) + " ..."
		}
		return hex.EncodeToString(data)
	}
}

// strictOutcome applies fieldValidation to the repeated and unknown fields errs: Strict refuses
// them (refuse words the refusal of a runtime strict decoding error), Warn returns one warning
// each (a YAML error one per line, as kube-apiserver splits them), Ignore drops them.
func strictOutcome(fieldValidation string, errs []error, refuse func(error) error) ([]string, error) {
	if len(errs) == 0 {
		return nil, nil
	}
	switch fieldValidation {
	case "Ignore":
		return nil, nil
	case "Strict":
		return nil, refuse(runtime.NewStrictDecodingError(errs))
	}
	warnings := make([]string, 0, len(errs))
	for _, e := range errs {
		warnings = append(warnings, yamlWarnings(e.Error())...)
	}
	return warnings, nil
}

// yamlWarnings splits a YAML decoder's strict error into one warning per line, as
// kube-apiserver does; any other error is one warning.
func yamlWarnings(s string) []string {
	for _, prefix := range []string{"yaml: unmarshal errors:\n", "error converting YAML to JSON: yaml: unmarshal errors:\n"} {
		if rest, ok := strings.CutPrefix(s, prefix); ok {
			lines := strings.Split(rest, "\n")
			for i, l := range lines {
				lines[i] = strings.TrimSpace(l)
			}
			return lines
		}
	}
	return []string{s}
}

// unknownFieldErrors are the strict errors of the unknown fields at paths.
func unknownFieldErrors(paths []string) []error {
	if len(paths) == 0 {
		return nil
	}
	errs := make([]error, len(paths))
	for i, p := range paths {
		errs[i] = fmt.Errorf("unknown field %q", p)
	}
	return errs
}

// serializer is apimachinery's JSON (or YAML) serializer over client-go's scheme, strict unless
// fieldValidation is Ignore: kube-apiserver's decoder of request bodies.
func serializer(yamlBody bool, fieldValidation string) *jsonserializer.Serializer {
	return jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, clientgoscheme.Scheme, clientgoscheme.Scheme,
		jsonserializer.SerializerOptions{Yaml: yamlBody, Strict: fieldValidation != "Ignore"})
}

// decodeGeneral decodes body (JSON, or YAML) as an object of bt, as kube-apiserver does:
// apimachinery's serializer reads its type and finds what repeats (and, for a built-in kind,
// what its Go type does not know); a custom resource's metadata is read as ObjectMeta and its
// schema prunes the rest.
func decodeGeneral(t Target, bt bodyType, body []byte, yamlBody bool, fieldValidation string) (*decoded, *decodeError) {
	if bt.goType == nil && !bt.custom {
		return decodeUntyped(bt, body, yamlBody, fieldValidation)
	}
	defaults := bt.gvk
	var into runtime.Object
	if bt.custom {
		into = &unstructured.Unstructured{}
	}
	out, gvk, err := serializer(yamlBody, fieldValidation).Decode(body, &defaults, into)
	var strict []error
	if err != nil {
		se, isStrict := runtime.AsStrictDecodingError(err)
		if !isStrict || out == nil {
			return nil, &decodeError{err: err, gvk: gvk}
		}
		strict = se.Errors()
	}
	d := &decoded{gvk: *gvk, strict: strict}
	if !bt.custom {
		if d.gvk != bt.gvk {
			return nil, &decodeError{err: conversionError(out, bt), gvk: gvk}
		}
		if d.obj, err = roundTrip(out, d.gvk); err != nil {
			return nil, &decodeError{err: err, gvk: gvk}
		}
		return d, nil
	}
	js, err := toJSON(body, yamlBody)
	if err == nil {
		d.obj, err = DecodeObject(js)
	}
	if err != nil {
		return nil, &decodeError{err: err, gvk: gvk}
	}
	unknown, err := customUnknown(t, bt, d.obj, d.gvk)
	if err != nil {
		return nil, &decodeError{err: err, gvk: gvk}
	}
	d.strict = append(d.strict, unknownFieldErrors(unknown)...)
	return d, nil
}

// decodeUntyped decodes the body of a built-in kind opemu serves without a Go type (a
// CustomResourceDefinition): its type read as kube-apiserver's decoder reads it (the URL's by
// default), what repeats found by the strict JSON decoding kube-apiserver's uses; unknown fields
// are the kind's own business.
func decodeUntyped(bt bodyType, body []byte, yamlBody bool, fieldValidation string) (*decoded, *decodeError) {
	var strict []error
	if yamlBody && fieldValidation != "Ignore" {
		if _, err := yaml.YAMLToJSONStrict(body); err != nil {
			strict = append(strict, err)
		}
	}
	js, err := toJSON(body, yamlBody)
	if err != nil {
		return nil, &decodeError{err: err}
	}
	gvk, err := jsonserializer.DefaultMetaFactory.Interpret(js)
	if err != nil {
		return nil, &decodeError{err: err}
	}
	*gvk = gvkWithDefaults(*gvk, bt.gvk)
	if fieldValidation != "Ignore" {
		var m map[string]any
		errs, err := kjson.UnmarshalStrict(js, &m)
		if err != nil {
			return nil, &decodeError{err: err, gvk: gvk}
		}
		strict = append(strict, errs...)
	}
	obj, err := DecodeObject(js)
	if err != nil {
		return nil, &decodeError{err: err, gvk: gvk}
	}
	defaultTypeMeta(bt, obj)
	return &decoded{obj: obj, gvk: *gvk, strict: strict}, nil
}

// toJSON is body as JSON: itself, or converted from YAML as kube-apiserver's YAML serializer
// converts it.
func toJSON(body []byte, yamlBody bool) ([]byte, error) {
	if !yamlBody {
		return body, nil
	}
	return yaml.YAMLToJSON(body)
}

// gvkWithDefaults is how kube-apiserver's decoder completes the type a body names from the
// URL's: a missing kind, a missing group and version, a missing version of the same group.
func gvkWithDefaults(actual, defaults schema.GroupVersionKind) schema.GroupVersionKind {
	if actual.Kind == "" {
		actual.Kind = defaults.Kind
	}
	if actual.Version == "" && actual.Group == "" {
		actual.Group, actual.Version = defaults.Group, defaults.Version
	}
	if actual.Version == "" && actual.Group == defaults.Group {
		actual.Version = defaults.Version
	}
	return actual
}

// customUnknown drops a custom resource's unknown fields and returns their paths in
// kube-apiserver's order: its metadata's (read as ObjectMeta), then its schema's, which prunes
// only an object of the URL's group and kind. Metadata that ObjectMeta cannot hold is an error.
func customUnknown(t Target, bt bodyType, obj map[string]any, gvk schema.GroupVersionKind) ([]string, error) {
	var unknown []string
	if md, ok := obj["metadata"]; ok && !metaKnown(md) {
		paths, err := metadataUnknown(md)
		if err != nil {
			return nil, err
		}
		if len(paths) > 0 {
			dropMetadataFields(obj, paths)
			unknown = paths
		}
	}
	if gvk.Group == bt.gvk.Group && gvk.Kind == bt.gvk.Kind && t.Kind.Schema != nil {
		unknown = append(unknown, t.Kind.Schema.Prune(obj)...)
	}
	return unknown, nil
}

// metadataUnknown reads md into ObjectMeta as the apiextensions-apiserver reads a custom
// resource's metadata (GetObjectMetaWithOptions): by sigs.k8s.io/json's strict decoding, whose
// unknown fields it returns ("metadata.x", "metadata.ownerReferences[0].y"); metadata ObjectMeta
// cannot hold is an error.
func metadataUnknown(md any) ([]string, error) {
	raw, err := json.Marshal(md)
	if err != nil {
		return nil, err
	}
	errs, err := kjson.UnmarshalStrict(raw, &metav1.ObjectMeta{})
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, e := range errs {
		var fe kjson.FieldError
		if errors.As(e, &fe) {
			paths = append(paths, "metadata."+fe.FieldPath())
		}
	}
	return paths, nil
}

// dropMetadataFields removes the fields at paths ("metadata.x", "metadata.ownerReferences[0].y")
// from obj, as reading metadata into ObjectMeta drops them.
func dropMetadataFields(obj map[string]any, paths []string) {
	for _, p := range paths {
		var cur any = obj
		rest := p
		for rest != "" {
			var seg string
			seg, rest, _ = strings.Cut(rest, ".")
			name, index := seg, -1
			if i := strings.IndexByte(seg, '['); i > 0 && strings.HasSuffix(seg, "]") {
				name = seg[:i]
				if _, err := fmt.Sscanf(seg[i:], "[%d]", &index); err != nil {
					break
				}
			}
			m, ok := cur.(map[string]any)
			if !ok {
				break
			}
			if rest == "" && index < 0 {
				delete(m, name)
				break
			}
			cur = m[name]
			if index >= 0 {
				l, ok := cur.([]any)
				if !ok || index >= len(l) {
					break
				}
				cur = l[index]
			}
		}
	}
}

// typedDecodeError is, for an object decoded from a request of a kind served from a Go type,
// the error kube-apiserver's decoder gives it (nil when it decodes): validation found it wrong,
// and a value its Go type cannot hold is refused before any validation. A body is a 400; a JSON
// Patch's or merge patch's result a 422 quoting it (sigs.k8s.io/json's words); a strategic
// merge patch's a 422 quoting the patch (the unstructured converter's words).
func typedDecodeError(t Target, obj map[string]any, o Options) error {
	bt := bodyTypeOf(Target{Kind: t.Kind})
	if bt.goType == nil || t.Sub == "scale" {
		return nil
	}
	v := reflect.New(bt.goType).Interface()
	switch o.decoded {
	case fromBody, fromPatch:
		raw, err := json.Marshal(obj)
		if err != nil {
			return nil
		}
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, v); err != nil {
			if o.decoded == fromPatch {
				return invalidPatchValue(o.quote(), err)
			}
			return cannotHandle(bt.gvk, bt.gvk.Kind, err)
		}
	case fromStrategicPatch:
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(plainNumbers(obj), v); err != nil {
			return invalidPatchValue(o.quote(), err)
		}
	}
	return nil
}

// wrongType is kube-apiserver's decoding error for a body of gvk sent as an object of bt: a
// kind its scheme does not know, or one it cannot convert.
func wrongType(bt bodyType, gvk schema.GroupVersionKind) error {
	obj, err := clientgoscheme.Scheme.New(gvk)
	if err != nil {
		return err
	}
	return conversionError(obj, bt)
}

// conversionError is kube-apiserver's answer to a body of another kind its scheme knows: the
// versioned object cannot be converted to the URL's kind's internal type.
func conversionError(out runtime.Object, bt bodyType) error {
	return fmt.Errorf("converting (%s) to (%s.%s): unknown conversion", reflect.TypeOf(out).Elem(), internalPackage(bt.gvk.Group), bt.gvk.Kind)
}

// internalPackage is the name of the Go package of a group's internal types in Kubernetes
// ("core" for the legacy group, the group's first label otherwise; events.k8s.io's Event is
// core's).
func internalPackage(group string) string {
	if group == "" || group == "events.k8s.io" {
		return "core"
	}
	first, _, _ := strings.Cut(group, ".")
	return first
}

// roundTrip is obj, a decoded Go value, as a JSON object with gvk's apiVersion and kind: what
// kube-apiserver keeps of a body is what its Go type holds.
func roundTrip(obj runtime.Object, gvk schema.GroupVersionKind) (map[string]any, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m, err := DecodeObject(raw)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return m, nil
}

// defaultTypeMeta fills a built-in kind's apiVersion and kind from the URL when the body leaves
// them out (absent, null or ""), as kube-apiserver's decoders do for typed kinds (the URL's
// group, version and kind are the decoder's defaults). Python and JavaScript code builds such
// bodies from typed models (V1Namespace(metadata=...)). Custom resources are not filled: they
// must name their kind, and their apiVersion must be the URL's.
func defaultTypeMeta(bt bodyType, obj map[string]any) {
	if bt.custom {
		return
	}
	if isUnset(obj, "kind") {
		obj["kind"] = bt.gvk.Kind
	}
	if isUnset(obj, "apiVersion") {
		obj["apiVersion"] = bt.gvk.GroupVersion().String()
	}
}

func isUnset(obj map[string]any, field string) bool {
	v, ok := obj[field]
	return !ok || v == nil || v == ""
}

// DecodeObject decodes body, which must be exactly one JSON object, the way objects are kept
// (numbers as json.Number, so integers survive exactly); anything else is a 400.
func DecodeObject(body []byte) (map[string]any, error) {
	if v, _, ok := jsonfast.Parse(body); ok {
		if obj, isObject := v.(map[string]any); isObject {
			return obj, nil
		}
	}
	return decodeObjectStd(body)
}

// decodeObjectStd is DecodeObject by encoding/json, which gives every error its message.
func decodeObjectStd(body []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("the request body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badRequest("the body of the request is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, badRequest("the body of the request holds more than one JSON value")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("the body of the request holds trailing data after the JSON object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("the body of the request must be a JSON object, not %s", jsonKind(v))
	}
	return obj, nil
}

// UnsupportedMediaType is the 415 kube-apiserver answers for a body format a resource does not
// take.
func UnsupportedMediaType(accepted string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + accepted,
	}}
}

// serverError is a 500 kube-apiserver answers for a failure of its own code that is not a
// Status (a server-side apply its field manager cannot type, a create carrying a
// resourceVersion): the message as it is, no reason.
func serverError(msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInternalServerError,
		Message: msg,
	}}
}
