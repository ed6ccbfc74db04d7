package crd

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/opemu/opemu/application"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"
)

// quickSchemas are the schemas the quick check is held to the validator on: the Application's
// (what the load writes) and one using every keyword quick knows, plus ones it must leave to
// the validator.
var quickSchemas = map[string]string{
	"application": "", // filled from the built-in CRD
	"keywords": `
type: object
required: [name]
properties:
  name: {type: string, minLength: 2, maxLength: 5}
  count: {type: integer, minimum: -3, maximum: 7, exclusiveMaximum: true}
  ratio: {type: number, minimum: 0, exclusiveMinimum: true}
  mode: {type: string, enum: [a, b], nullable: true}
  note: {type: string, nullable: true}
  level: {type: integer, enum: [1, 2]}
  port: {x-kubernetes-int-or-string: true}
  when: {type: string, format: date-time}
  tags: {type: array, minItems: 1, maxItems: 3, items: {type: string, enum: [x, y]}}
  labels: {type: object, additionalProperties: {type: string}, minProperties: 1, maxProperties: 2}
  closed:
    type: object
    additionalProperties: false
    properties:
      enabled: {type: boolean}
  any: {x-kubernetes-preserve-unknown-fields: true}
  pattern: {type: string, pattern: "^a+$"}
  multiple: {type: integer, multipleOf: 3}
  uuid: {type: string, format: uuid}
`,
}

func quickFixtures(t testing.TB) map[string]*schema {
	t.Helper()
	out := map[string]*schema{}
	for name, src := range quickSchemas {
		var props *apiextv1.JSONSchemaProps
		if src == "" {
			props = builtInApplicationSchema(t)
		} else {
			props = new(apiextv1.JSONSchemaProps)
			require.NoError(t, yaml.Unmarshal([]byte(src), props))
		}
		s, err := newSchema(props, nil, false)
		require.NoError(t, err)
		out[name] = s
	}
	return out
}

func builtInApplicationSchema(t testing.TB) *apiextv1.JSONSchemaProps {
	t.Helper()
	return application.CRD().Spec.Versions[0].Schema.OpenAPIV3Schema
}

func decodeNumbers(t testing.TB, src string) any {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader([]byte(src)))
	d.UseNumber()
	var v any
	require.NoError(t, d.Decode(&v))
	return v
}

// TestQuickVouchesForTheUsual: the objects a client usually writes are vouched for without the
// validator, and none the validator refuses is.
func TestQuickVouchesForTheUsual(t *testing.T) {
	t.Parallel()
	schemas := quickFixtures(t)
	for _, tc := range []struct {
		schema, name, obj string
		quick             bool
	}{
		{"application", "a create", `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"web","labels":{"a":"b"}},"spec":{"image":"nginx:1","replicas":3,"strategy":"RollingUpdate","config":{"k":"v"}}}`, true},
		{"application", "with the controller's status", `{"spec":{"image":"nginx","replicas":0},"status":{"phase":"Running","replicas":1,"conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-24T08:00:00Z","observedGeneration":2}]}}`, true},
		{"application", "replicas over the maximum", `{"spec":{"image":"nginx","replicas":101}}`, false},
		{"application", "replicas as a fraction", `{"spec":{"image":"nginx","replicas":1.5}}`, false},
		{"application", "no image", `{"spec":{"replicas":1}}`, false},
		{"application", "an empty image", `{"spec":{"image":"","replicas":1}}`, false},
		{"application", "a strategy not in the enum", `{"spec":{"image":"x","replicas":1,"strategy":"Blue"}}`, false},
		{"application", "a config value not a string", `{"spec":{"image":"x","replicas":1,"config":{"k":1}}}`, false},
		{"application", "a time in another form", `{"spec":{"image":"x","replicas":1},"status":{"conditions":[{"type":"R","status":"True","lastTransitionTime":"2026-11-24T08:00:00+01:00"}]}}`, false},
		{"application", "February the 30th", `{"spec":{"image":"x","replicas":1},"status":{"conditions":[{"type":"R","status":"True","lastTransitionTime":"2026-02-30T08:00:00Z"}]}}`, false},
		{"keywords", "within every bound", `{"name":"abc","count":6,"mode":"a","note":null,"level":2,"port":"http","tags":["x"],"labels":{"a":"b"},"closed":{"enabled":true},"any":{"x":[1,{}]},"when":"2024-02-29T23:59:59Z"}`, true},
		{"keywords", "a null not in a nullable enum", `{"name":"ab","mode":null}`, false},
		{"keywords", "int-or-string as an integer", `{"name":"ab","port":8080}`, true},
		{"keywords", "an exclusive maximum reached", `{"name":"ab","count":7}`, false},
		{"keywords", "a name too long in runes", `{"name":"éééééé"}`, false},
		{"keywords", "too many tags", `{"name":"ab","tags":["x","y","x","y"]}`, false},
		{"keywords", "too many labels", `{"name":"ab","labels":{"a":"1","b":"2","c":"3"}}`, false},
		{"keywords", "too few labels", `{"name":"ab","labels":{}}`, false},
		{"keywords", "a closed object's unknown field", `{"name":"ab","closed":{"off":true}}`, false},
		{"keywords", "a pattern: the validator's", `{"name":"ab","pattern":"aaa"}`, false},
		{"keywords", "multipleOf: the validator's", `{"name":"ab","multiple":3}`, false},
		{"keywords", "another format: the validator's", `{"name":"ab","uuid":"x"}`, false},
		{"keywords", "a number: the validator's", `{"name":"ab","ratio":0.5}`, false},
	} {
		t.Run(tc.schema+"/"+tc.name, func(t *testing.T) {
			s := schemas[tc.schema]
			v := decodeNumbers(t, tc.obj)
			assert.Equal(t, tc.quick, s.c.quick.valid(v))
			if s.c.quick.valid(v) {
				assert.Empty(t, validatorErrors(s, v))
			}
		})
	}
}

// validatorErrors is what apiextensions' OpenAPI schema validator, which quick shortcuts,
// finds in v.
func validatorErrors(s *schema, v any) field.ErrorList {
	vs, err := s.c.validators()
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return apiservervalidation.ValidateCustomResource(nil, toUnstructured(v), vs.object)
}

// FuzzQuickValid: whatever the object, the quick check never vouches for one apiextensions'
// validator refuses.
func FuzzQuickValid(f *testing.F) {
	for _, seed := range []string{
		`{"spec":{"image":"nginx","replicas":3}}`,
		`{"spec":{"image":"n","replicas":-1,"strategy":"Recreate","resources":{"limits":{"cpu":"1"}}}}`,
		`{"name":"abc","count":-3,"mode":"a","level":1,"port":1,"tags":["y","y"],"labels":{},"closed":{},"when":"2000-02-29T00:00:00Z"}`,
		`{"name":"ab","count":6.0,"level":1.0,"tags":[],"when":"1900-02-29T00:00:00Z"}`,
		`{"status":{"conditions":[{"type":"a","status":"Unknown","lastTransitionTime":"2026-12-31T23:59:60Z"}]}}`,
		`[1,2]`, `null`, `"x"`, `{"name":null}`, `{"name":"ab","port":true}`,
	} {
		f.Add(seed)
	}
	schemas := quickFixtures(f)
	f.Fuzz(func(t *testing.T, src string) {
		d := json.NewDecoder(bytes.NewReader([]byte(src)))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		for name, s := range schemas {
			if s.c.quick.valid(v) {
				assert.Empty(t, validatorErrors(s, v), "%s: quick vouched for %s", name, src)
			}
		}
	})
}
