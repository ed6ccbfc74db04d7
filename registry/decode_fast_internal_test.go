package registry

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/opemu/opemu/kinds"
	"github.com/stretchr/testify/require"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// gadgetCRD is a custom resource with a schema that prunes (spec.size, spec.tags, spec.extra
// kept as sent), for the decoding tests.
const gadgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.test.opemu.dev}
spec:
  group: test.opemu.dev
  scope: Namespaced
  names: {kind: Gadget, plural: gadgets}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              tags: {type: array, items: {type: string}}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// decodeTargets are the targets the decoding tests write: a custom resource (Gadget), kinds
// served from Go types with a schema (ConfigMap, Deployment) and without one (Lease), a Scale.
func decodeTargets(t testing.TB) []Target {
	t.Helper()
	reg := kinds.New()
	crds, err := crd.New(crd.Config{Kinds: reg})
	require.NoError(t, err)
	var c apiextv1.CustomResourceDefinition
	require.NoError(t, yaml.UnmarshalStrict([]byte(gadgetCRD), &c))
	_, errs, err := crds.Register(&c)
	require.NoError(t, err)
	require.Empty(t, errs)
	lookup := func(group, plural, sub string) Target {
		k, ok := reg.Lookup(group, "v1", plural)
		require.True(t, ok, plural)
		return Target{Kind: k, Key: cache.Key{Group: k.Group, Resource: k.Plural, Namespace: "default"}, Sub: sub}
	}
	return []Target{
		lookup("test.opemu.dev", "gadgets", ""), lookup("", "configmaps", ""), lookup("apps", "deployments", ""),
		lookup("coordination.k8s.io", "leases", ""), lookup("apps", "deployments", "scale"),
	}
}

// FuzzDecodeBody: whatever the fast path vouches for, the general path (apimachinery's
// serializer, strict decoding into ObjectMeta, the schema's pruning) decodes with no error, to
// the same object (a built-in kind's once both take its Go type's shape), with the same unknown
// fields and nothing repeated.
func FuzzDecodeBody(f *testing.F) {
	targets := decodeTargets(f)
	for _, seed := range []string{
		`{"apiVersion":"test.opemu.dev/v1","kind":"Gadget","metadata":{"name":"g","labels":{"a":"b"}},"spec":{"size":1,"bogus":2,"extra":{"x":[1]}}}`,
		`{"apiVersion":"test.opemu.dev/v1","kind":"Gadget","metadata":{"name":"g","bogus":1},"spec":{}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","finalizers":["a/b"]},"data":{"a":"1"}}`,
		`{"metadata":{"name":"c"},"data":{"a":"1"},"binaryData":null}`,
		`{"kind":"ConfigMap","metadata":{"name":"c","creationTimestamp":"2026-11-24T08:00:00Z","generation":3},"data":{"a":"1"},"bogus":1}`,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`,
		`{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l"},"spec":{"holderIdentity":"me"}}`,
		`{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web"},"spec":{"replicas":3}}`,
		`{"apiVersion":"v1","Kind":"ConfigMap","metadata":{"name":"c"}}`,
		`{"apiVersion":"test.opemu.dev/v1","kind":"Gadget","metadata":{"name":"g","managedFields":[{"manager":"m","operation":"Apply","apiVersion":"test.opemu.dev/v1","time":"2026-11-24T08:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:size":{}}}}]},"spec":{"size":1}}`,
		`{"apiVersion":"test.opemu.dev/v1","kind":"Gadget","metadata":{"name":"g","managedFields":[{"manager":"m","bogus":1}]},"spec":{}}`,
	} {
		for i := range targets {
			for fv := range uint8(3) {
				f.Add(uint8(i), fv, []byte(seed))
			}
		}
	}
	f.Fuzz(func(t *testing.T, which, fv uint8, body []byte) {
		tg := targets[int(which)%len(targets)]
		fieldValidation := []string{"Strict", "Warn", "Ignore"}[fv%3]
		bt := bodyTypeOf(tg)
		fast, unknown, ok := decodeFast(tg, bt, bytes.Clone(body), fieldValidation)
		if !ok {
			return
		}
		d, derr := decodeGeneral(tg, bt, body, false, fieldValidation)
		if derr != nil && bt.goType != nil {
			// A value its Go type cannot hold is refused when the object is validated, as
			// decoding would have refused it.
			err := typedDecodeError(tg, fast, Options{decoded: fromBody})
			require.Error(t, err, "vouched for, but the general way refuses it: %v\n%s", derr.err, body)
			require.Equal(t, derr.bodyError(bt, body).Error(), err.Error(), "%s", body)
			return
		}
		if derr != nil {
			t.Fatalf("vouched for, but the general way refuses it: %v\n%s", derr.err, body)
		}
		if fieldValidation != "Ignore" {
			require.Equal(t, errorStrings(unknownFieldErrors(unknown)), errorStrings(d.strict), "%s", body)
		}
		general := d.obj
		if bt.goType != nil && tg.Kind.Schema != nil {
			tg.Kind.Schema.Default(fast)
			tg.Kind.Schema.Default(general)
		}
		require.Equal(t, canonicalJSON(t, general), canonicalJSON(t, fast), "%s", body)
	})
}

// FuzzMetaKnown: metadata metaKnown vouches for is read into ObjectMeta by strict decoding with
// no error and nothing unknown or repeated.
func FuzzMetaKnown(f *testing.F) {
	for _, seed := range []string{
		`{"name":"a","namespace":"b","uid":"u","resourceVersion":"1","generation":2,"creationTimestamp":"2026-11-24T08:00:00Z","labels":{"a":"b"},"annotations":{"x":null},"finalizers":["f"]}`,
		`{"name":"a","deletionTimestamp":null,"deletionGracePeriodSeconds":30,"selfLink":"/x","generateName":"g-"}`,
		`{"name":"a","bogus":1}`, `{"generation":1.5}`, `{"creationTimestamp":""}`, `null`, `"a"`,
		`{"name":"a","managedFields":[{"manager":"m","operation":"Update","apiVersion":"v1","time":"2026-11-24T08:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{".":{},"f:k":{}}},"subresource":"status"}]}`,
		`{"managedFields":[{"manager":null,"time":null,"fieldsV1":null}]}`, `{"managedFields":[{"Manager":"m"}]}`,
		`{"managedFields":[{"time":"yesterday"}]}`, `{"managedFields":[{"fieldsV1":[1]}]}`, `{"managedFields":[null]}`, `{"managedFields":{}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v, repeats, ok := jsonfast.Parse(raw)
		if !ok || repeats || !metaKnown(v) {
			return
		}
		b, err := json.Marshal(v)
		require.NoError(t, err)
		errs, err := kjson.UnmarshalStrict(b, &metav1.ObjectMeta{})
		require.NoError(t, err, "vouched for, but ObjectMeta does not hold it: %s", raw)
		require.Empty(t, errs, "vouched for, but strict decoding finds: %s", raw)
	})
}

// FuzzPlainJSONPatch: a JSON Patch plainJSONPatch vouches for is one kube-apiserver's strict
// decoding of its operations finds nothing in.
func FuzzPlainJSONPatch(f *testing.F) {
	for _, seed := range []string{
		`[{"op":"add","path":"/a","value":{"x":1}},{"op":"move","from":"/a","path":"/b"}]`,
		`[{"op":"add","path":"/a","value":1,"bogus":2}]`, `[{"op":1}]`, `[1]`, `{}`, `[{"op":null,"path":"/a"}]`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p := &patcher{}
		var ok bool
		if p.parsed, p.repeats, ok = jsonfast.Parse(body); !ok || !p.plainJSONPatch() {
			return
		}
		var ops []jsonPatchOp
		errs, err := kjson.UnmarshalStrict(body, &ops)
		require.NoError(t, err, "vouched for, but strict decoding fails: %s", body)
		require.Empty(t, errs, "vouched for, but strict decoding finds: %s", body)
	})
}

func errorStrings(errs []error) []string {
	out := make([]string, len(errs))
	for i, e := range errs {
		out[i] = e.Error()
	}
	return out
}

func canonicalJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestDecodeBody checks the answers of the body decoding against kube-apiserver's, as the
// conformance corpus recorded them (test/conformance/recorded/bodies.yaml).
func TestDecodeBody(t *testing.T) {
	targets := decodeTargets(t)
	gadget, configMap, deployment := targets[0], targets[1], targets[2]
	tests := []struct {
		name            string
		t               Target
		format          BodyFormat
		fieldValidation string
		body            string
		warnings        []string
		err             string
		want            map[string]any // some of the object's fields
	}{
		{name: "unknown metadata and spec fields of a custom resource, warned in order", t: gadget, fieldValidation: "Warn",
			body:     `{"apiVersion":"test.opemu.dev/v1","kind":"Gadget","metadata":{"name":"g","zz":1,"aa":2,"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"o","uid":"u","bogus":1}]},"spec":{"size":1,"bogus":2}}`,
			warnings: []string{`unknown field "metadata.aa"`, `unknown field "metadata.ownerReferences[0].bogus"`, `unknown field "metadata.zz"`, `unknown field "spec.bogus"`},
			want:     map[string]any{"metadata": map[string]any{"name": "g", "ownerReferences": []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}}}, "spec": map[string]any{"size": json.Number("1")}}},
		{name: "unknown fields of a custom resource, refused", t: gadget, fieldValidation: "Strict",
			body: `{"apiVersion":"test.opemu.dev/v1","kind":"Gadget","metadata":{"name":"g","bogus":1},"spec":{"bogus":2}}`,
			err:  `Gadget in version "v1" cannot be handled as a Gadget: strict decoding error: unknown field "metadata.bogus", unknown field "spec.bogus"`},
		{name: "a repeated field of a custom resource keeps the last value", t: gadget, fieldValidation: "Warn",
			body:     `{"apiVersion":"test.opemu.dev/v1","kind":"Gadget","metadata":{"name":"g"},"spec":{"size":1,"tags":["a"]},"spec":{"size":2}}`,
			warnings: []string{`duplicate field "spec"`},
			want:     map[string]any{"spec": map[string]any{"size": json.Number("2")}}},
		{name: "a built-in kind's repeated fields merge as its Go type merges them", t: configMap, fieldValidation: "Ignore",
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"},"data":{"a":"1"},"data":{"b":"2"}}`,
			want: map[string]any{"data": map[string]any{"a": "1", "b": "2"}}},
		{name: "a built-in kind's strict errors in the order of the body", t: configMap, fieldValidation: "Strict",
			body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","bogus":1},"data":{"a":"1"},"data":{"b":"2"},"zzz":2}`,
			err:  `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "metadata.bogus", duplicate field "data", unknown field "zzz"`},
		{name: "YAML's repeated keys, warned line by line", t: configMap, format: YAMLBody, fieldValidation: "Warn",
			body:     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\ndata:\n  a: \"1\"\n  a: \"2\"\nbogus: 1\n",
			warnings: []string{`line 7: key "a" already set in map`, `unknown field "bogus"`},
			want:     map[string]any{"data": map[string]any{"a": "2"}}},
		{name: "a built-in kind's type from the URL", t: configMap, fieldValidation: "Warn", body: `{"metadata":{"name":"c"}}`,
			want: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}},
		{name: "a kind the scheme knows sent as another", t: configMap, body: `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s"}}`,
			err: `Secret in version "v1" cannot be handled as a ConfigMap: converting (v1.Secret) to (core.ConfigMap): unknown conversion`},
		{name: "a kind the scheme does not know", t: deployment, body: `{"apiVersion":"apps/v2","kind":"Deployment","metadata":{"name":"s"}}`,
			err: `Deployment in version "v2" cannot be handled as a Deployment: no kind "Deployment" is registered for version "apps/v2" in scheme "pkg/runtime/scheme.go:111"`},
		{name: "a value of the wrong type", t: deployment, body: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":"two","bogus":1}}`,
			err: `Deployment in version "v1" cannot be handled as a Deployment: json: cannot unmarshal string into Go struct field DeploymentSpec.spec.replicas of type int32`},
		{name: "a custom resource without its kind", t: gadget, body: `{"apiVersion":"test.opemu.dev/v1","metadata":{"name":"g"}}`,
			err: `the object provided is unrecognized (must be of type Gadget): Object 'Kind' is missing in '{"apiVersion":"test.opemu.dev/v1","metadata":{"name":"g"}}' ({"apiVersion":"test.opemu.dev/ ...)`},
		{name: "a custom resource of another version", t: gadget, body: `{"apiVersion":"test.opemu.dev/v2","kind":"Gadget","metadata":{"name":"g"}}`,
			err: `the API version in the data (test.opemu.dev/v2) does not match the expected API version (test.opemu.dev/v1)`},
		{name: "a custom resource's metadata ObjectMeta cannot hold", t: gadget, body: `{"apiVersion":"test.opemu.dev/v1","kind":"Gadget","metadata":{"name":"g","labels":["a"]}}`,
			err: `Gadget in version "v1" cannot be handled as a Gadget: json: cannot unmarshal array into Go struct field ObjectMeta.labels of type map[string]string`},
		{name: "not JSON", t: configMap, body: `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}} {}`,
			err: `the object provided is unrecognized (must be of type ConfigMap): couldn't get version/kind; json parse error: invalid character '{' after top-level value ({"apiVersion": "v1", "kind": " ...)`},
		{name: "empty", t: gadget, err: `the object provided is unrecognized (must be of type Gadget): couldn't get version/kind; json parse error: unexpected end of JSON input (<empty>)`},
		{name: "an array", t: gadget, body: `[]`,
			err: `the object provided is unrecognized (must be of type Gadget): couldn't get version/kind; json parse error: json: cannot unmarshal array into Go value of type struct { APIVersion string "json:\"apiVersion,omitempty\""; Kind string "json:\"kind,omitempty\"" } (5b5d)`},
		{name: "YAML that is not YAML", t: configMap, format: YAMLBody, body: "apiVersion: v1\nkind: [ConfigMap\n",
			err: `the object provided is unrecognized (must be of type ConfigMap): yaml: line 2: did not find expected ',' or ']' (61706956657273696f6e3a2076310a6b696e643a205b436f6e6669674d61 ...)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{FieldValidation: tt.fieldValidation}
			obj, warnings, err := DecodeBody(tt.t, []byte(tt.body), tt.format, &o)
			require.Equal(t, fromBody, o.decoded)
			if tt.err != "" {
				require.EqualError(t, err, tt.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.warnings, warnings)
			for k, v := range tt.want {
				require.Equal(t, v, subset(obj[k], v), k)
			}
		})
	}
}

// subset is the part of got that want names (maps compared by want's keys only).
func subset(got, want any) any {
	g, ok := got.(map[string]any)
	w, isMap := want.(map[string]any)
	if !ok || !isMap {
		return got
	}
	out := map[string]any{}
	for k, v := range w {
		if gv, ok := g[k]; ok {
			out[k] = subset(gv, v)
		}
	}
	return out
}
