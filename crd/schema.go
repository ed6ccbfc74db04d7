package crd

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/opemu/opemu/kinds"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// schema is one version's structural schema, compiled once; it is the kinds.Schema of that
// version's Kind. A client's CRD is compiled when it is registered (a schema that does not
// compile is a field error of the CRD); a built-in CRD, known to compile, on first use, so
// start-up does not pay for it.
type schema struct {
	props *apiextv1.JSONSchemaProps

	once     sync.Once
	compiled *jsonschema.Schema
	quick    *quick // compiled with it, from the same document
	err      error  // from a lazy compile (a built-in schema that does not compile: a bug)

	// propPtrs holds, per object schema node of props, its Properties as pointers (see
	// properties); filled on first use, so a schema costs nothing until objects are written.
	propPtrs sync.Map // *apiextv1.JSONSchemaProps → map[string]*apiextv1.JSONSchemaProps
}

var _ kinds.Schema = (*schema)(nil)

// OpenAPI returns the schema as the CRD gives it.
func (s *schema) OpenAPI() *apiextv1.JSONSchemaProps { return s.props }

// compile returns props compiled now, or, when lazy, on first use.
func compile(props *apiextv1.JSONSchemaProps, lazy bool) (*schema, error) {
	s := &schema{props: props}
	if !lazy {
		s.once.Do(s.compile)
	}
	return s, s.err
}

// compiledSchema returns the compiled schema and its quick check, compiling them on first use.
func (s *schema) compiledSchema() (*jsonschema.Schema, *quick, error) {
	s.once.Do(s.compile)
	return s.compiled, s.quick, s.err
}

func (s *schema) compile() { s.compiled, s.quick, s.err = compileJSONSchema(s.props) }

// compileJSONSchema translates an OpenAPI v3 structural schema into JSON Schema (draft 4, which
// OpenAPI 3.0 follows) and compiles it, and its quick check from the same document.
func compileJSONSchema(props *apiextv1.JSONSchemaProps) (*jsonschema.Schema, *quick, error) {
	raw, err := json.Marshal(props)
	if err != nil {
		return nil, nil, err
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(string(raw)))
	if err != nil {
		return nil, nil, err
	}
	doc = translate(doc)
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft4)
	const url = "mem://schema.json"
	if err := c.AddResource(url, doc); err != nil {
		return nil, nil, err
	}
	compiled, err := c.Compile(url)
	if err != nil {
		return nil, nil, err
	}
	return compiled, compileQuick(doc), nil
}

// translate rewrites the OpenAPI extensions JSON Schema does not know: `nullable` allows null,
// `x-kubernetes-int-or-string` allows an integer or a string, other `x-kubernetes-*` keys are
// dropped. Annotations (`default`, `description`, `example`) stay; they do not validate.
func translate(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			if strings.HasPrefix(k, "x-kubernetes-") || k == "nullable" || k == "example" || k == "externalDocs" {
				continue
			}
			switch k {
			case "properties", "patternProperties", "definitions":
				m, _ := e.(map[string]any)
				props := make(map[string]any, len(m))
				for name, s := range m {
					props[name] = translate(s)
				}
				out[k] = props
			default:
				out[k] = translate(e)
			}
		}
		if ios, _ := v["x-kubernetes-int-or-string"].(bool); ios {
			delete(out, "type")
			delete(out, "anyOf")
			out["anyOf"] = []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}
		}
		if nullable, _ := v["nullable"].(bool); nullable {
			if t, ok := out["type"].(string); ok {
				out["type"] = []any{t, "null"}
			}
			if enum, ok := out["enum"].([]any); ok {
				out["enum"] = append(enum, nil)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = translate(e)
		}
		return out
	}
	return v
}

// Validate checks obj against the kind's schema. Each failure becomes one field error with the
// Kubernetes path ("spec.replicas"), sorted by path. metadata is not checked here.
func (s *schema) Validate(obj map[string]any) field.ErrorList {
	compiled, quick, err := s.compiledSchema()
	if err != nil {
		return field.ErrorList{field.InternalError(field.NewPath(""), err)}
	}
	if quick.valid(obj) {
		return nil
	}
	err = compiled.Validate(normalize(obj))
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return field.ErrorList{field.InternalError(field.NewPath(""), err)}
	}
	var leaves []*jsonschema.ValidationError
	collectLeaves(verr, &leaves)
	seen := map[string]bool{}
	var errs field.ErrorList
	for _, l := range leaves {
		for _, fe := range toFieldErrors(obj, l) {
			id := fe.Field + "|" + string(fe.Type) + "|" + fe.Detail
			if !seen[id] {
				seen[id] = true
				errs = append(errs, fe)
			}
		}
	}
	sort.SliceStable(errs, func(i, j int) bool { return errs[i].Field < errs[j].Field })
	return errs
}

func collectLeaves(e *jsonschema.ValidationError, out *[]*jsonschema.ValidationError) {
	if len(e.Causes) == 0 {
		*out = append(*out, e)
		return
	}
	for _, c := range e.Causes {
		collectLeaves(c, out)
	}
}

// toFieldErrors words one schema failure as Kubernetes does for CRDs.
func toFieldErrors(obj map[string]any, e *jsonschema.ValidationError) field.ErrorList {
	loc := e.InstanceLocation
	path := fieldPath(loc)
	value, _ := valueAt(obj, e.InstanceLocation)
	value = plain(value)
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		var errs field.ErrorList
		for _, m := range k.Missing {
			errs = append(errs, field.Required(child(loc, m), ""))
		}
		return errs
	case *kind.Type:
		return field.ErrorList{field.TypeInvalid(path, value, fmt.Sprintf("must be of type %s", strings.Join(k.Want, " or ")))}
	case *kind.Enum:
		want := make([]string, 0, len(k.Want))
		for _, w := range k.Want {
			if w != nil {
				want = append(want, fmt.Sprint(w))
			}
		}
		return field.ErrorList{field.NotSupported(path, value, want)}
	case *kind.Minimum:
		return field.ErrorList{field.Invalid(path, value, "must be greater than or equal to "+ratString(k.Want))}
	case *kind.Maximum:
		return field.ErrorList{field.Invalid(path, value, "must be less than or equal to "+ratString(k.Want))}
	case *kind.ExclusiveMinimum:
		return field.ErrorList{field.Invalid(path, value, "must be greater than "+ratString(k.Want))}
	case *kind.ExclusiveMaximum:
		return field.ErrorList{field.Invalid(path, value, "must be less than "+ratString(k.Want))}
	case *kind.MinLength:
		return field.ErrorList{field.Invalid(path, value, fmt.Sprintf("should be at least %d chars long", k.Want))}
	case *kind.MaxLength:
		return field.ErrorList{field.TooLong(path, value, k.Want)}
	case *kind.Pattern:
		return field.ErrorList{field.Invalid(path, value, fmt.Sprintf("should match '%s'", k.Want))}
	case *kind.MinItems:
		return field.ErrorList{field.Invalid(path, value, fmt.Sprintf("should have at least %d items", k.Want))}
	case *kind.MaxItems:
		return field.ErrorList{field.TooMany(path, k.Got, k.Want)}
	case *kind.AdditionalProperties:
		var errs field.ErrorList
		for _, p := range k.Properties {
			errs = append(errs, field.Forbidden(child(loc, p), "unknown field"))
		}
		return errs
	}
	return field.ErrorList{field.Invalid(path, value, e.ErrorKind.LocalizedString(printer))}
}

// printer words the validator's messages for kinds opemu does not map itself.
var printer = message.NewPrinter(language.English)

func ratString(r *big.Rat) string {
	if r == nil {
		return "?"
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.FloatString(6)
}

// fieldPath turns a JSON pointer's tokens into a Kubernetes field path (numbers index lists).
func fieldPath(loc []string) *field.Path {
	var p *field.Path
	for _, tok := range loc {
		if i, err := strconv.Atoi(tok); err == nil && p != nil {
			p = p.Index(i)
			continue
		}
		if p == nil {
			p = field.NewPath(tok)
		} else {
			p = p.Child(tok)
		}
	}
	if p == nil {
		p = field.NewPath("")
	}
	return p
}

// child is the path of property name under the object at loc.
func child(loc []string, name string) *field.Path {
	return fieldPath(append(append([]string(nil), loc...), name))
}

func valueAt(obj any, loc []string) (any, bool) {
	cur := obj
	for _, tok := range loc {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// plain makes a value printable the way Kubernetes prints it in an error ("150", not json.Number).
func plain(v any) any {
	switch v := v.(type) {
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i
		}
		if f, err := v.Float64(); err == nil {
			return f
		}
		return v.String()
	case map[string]any, []any:
		return "object"
	}
	return v
}

// normalize converts numbers to json.Number so the validator sees integers exactly, whatever
// decoded obj (float64 from encoding/json, int or int64 from Go code). It copies only the
// objects and arrays on the way to a converted number and shares the rest with v (the
// validator only reads): an object decoded as opemu decodes is mostly json.Number already.
func normalize(v any) any {
	out, _ := normalized(v)
	return out
}

// normalized returns v normalized and whether that differs from v.
func normalized(v any) (any, bool) {
	switch v := v.(type) {
	case map[string]any:
		var out map[string]any // a copy, made at the first member that changes
		for k, e := range v {
			n, changed := normalized(e)
			if !changed {
				continue
			}
			if out == nil {
				out = maps.Clone(v)
			}
			out[k] = n
		}
		if out == nil {
			return v, false
		}
		return out, true
	case []any:
		var out []any
		for i, e := range v {
			n, changed := normalized(e)
			if !changed {
				continue
			}
			if out == nil {
				out = slices.Clone(v)
			}
			out[i] = n
		}
		if out == nil {
			return v, false
		}
		return out, true
	case float64:
		return json.Number(strconv.FormatFloat(v, 'f', -1, 64)), true
	case float32:
		return json.Number(strconv.FormatFloat(float64(v), 'f', -1, 32)), true
	case int:
		return json.Number(strconv.Itoa(v)), true
	case int64:
		return json.Number(strconv.FormatInt(v, 10)), true
	case int32:
		return json.Number(strconv.FormatInt(int64(v), 10)), true
	}
	return v, false
}
