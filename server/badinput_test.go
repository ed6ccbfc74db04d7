package server_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// appJSON is an Application body with metadata and spec given as raw JSON.
func appJSON(metadata, spec string) string {
	return fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":%s,"spec":%s}`, metadata, spec)
}

// yamlAliases is an Application named name in YAML whose 30 aliases of a 300 KB scalar expand it
// to 9 MB of JSON.
func yamlAliases(name string) string {
	return "apiVersion: cloudnative.elide.dev/v1\nkind: Application\nmetadata: {name: " + name + "}\nspec:\n  replicas: 1\n  image: nginx:1\n  config:\n    a: &big " +
		strings.Repeat("x", 300<<10) + "\n    b: [" + strings.TrimPrefix(strings.Repeat(", *big", 30), ", ") + "]\n"
}

// snapshot is every stored Application and Namespace, as clients list them.
func snapshot(t *testing.T, e *env) []any {
	t.Helper()
	apps := e.do("GET", "/apis/cloudnative.elide.dev/v1/applications", "", "").json(t)
	nss := e.do("GET", "/api/v1/namespaces", "", "").json(t)
	return []any{apps["items"], nss["items"]}
}

// TestBadInputMatrix sends every kind of bad input the issue names (wrong content types, huge
// bodies, deep nesting, invalid names and labels, apiVersion, kind and namespace mismatches,
// unicode, nulls, bad numbers, spec: null, duplicate fields, bad patches) and checks each gets
// its Kubernetes Status, and that a list taken before and after is identical.
func TestBadInputMatrix(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, ns := range []string{"default", "team-a"} {
		path := "/apis/cloudnative.elide.dev/v1/namespaces/" + ns + "/applications"
		for i := range 3 {
			require.Equal(t, 201, e.do("POST", path, "application/json", app(fmt.Sprint("keep-", i), i+1, "nginx:1.27")).code)
		}
	}
	before := snapshot(t, e)
	obj := appsPath + "/keep-0"
	spec := `{"replicas":1,"image":"nginx:1"}`

	tests := []statusCase{
		// Content types.
		{name: "xml", method: "POST", path: appsPath, ctype: "application/xml", body: "<a/>", code: 415, reason: "UnsupportedMediaType"},
		{name: "form", method: "POST", path: appsPath, ctype: "application/x-www-form-urlencoded", body: "a=b", code: 415, reason: "UnsupportedMediaType"},
		{name: "multipart", method: "POST", path: appsPath, ctype: "multipart/form-data; boundary=x", body: "--x--", code: 415, reason: "UnsupportedMediaType"},
		{name: "protobuf for a custom resource", method: "POST", path: appsPath, ctype: "application/vnd.kubernetes.protobuf", body: "k8s\x00", code: 415, reason: "UnsupportedMediaType"},
		{name: "patch type on create", method: "POST", path: appsPath, ctype: "application/merge-patch+json", body: appJSON(`{"name":"p"}`, spec), code: 415, reason: "UnsupportedMediaType"},
		{name: "unknown patch type", method: "PATCH", path: obj, ctype: "application/json", body: `{}`, code: 415, reason: "UnsupportedMediaType"},
		{name: "YAML that is not YAML", method: "POST", path: appsPath, ctype: "application/yaml", body: "a: [\n", code: 400, reason: "BadRequest"},
		{name: "YAML alias bomb", method: "POST", path: appsPath, ctype: "application/yaml", body: "a: &a [*a, *a]\n", code: 400, reason: "BadRequest"},
		// Aliases that expand past twice MAX_BODY (3 MiB here): 30 of a 300 KB scalar.
		{name: "YAML aliases on create", method: "POST", path: appsPath, ctype: "application/yaml", body: yamlAliases("aliases"), code: 413, reason: "RequestEntityTooLarge", message: "aliases of the YAML body"},
		{name: "YAML aliases on update", method: "PUT", path: obj, ctype: "application/yaml", body: yamlAliases("keep-0"), code: 413, reason: "RequestEntityTooLarge", message: "aliases of the YAML body"},
		{name: "YAML aliases on apply", method: "PATCH", path: obj + "?fieldManager=m", ctype: "application/apply-patch+yaml", body: yamlAliases("keep-0"), code: 413, reason: "RequestEntityTooLarge", message: "aliases of the YAML body"},
		{name: "YAML aliases in DeleteOptions", method: "DELETE", path: obj, ctype: "application/yaml", body: "kind: DeleteOptions\napiVersion: v1\ndryRun: [&a " + strings.Repeat("x", 300<<10) + strings.Repeat(", *a", 30) + "]\n", code: 413, reason: "RequestEntityTooLarge"},
		{name: "YAML aliases in a review", method: "POST", path: "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", ctype: "application/yaml", body: "kind: SelfSubjectAccessReview\napiVersion: authorization.k8s.io/v1\nspec:\n  resourceAttributes:\n    verb: &a " + strings.Repeat("x", 300<<10) + "\n    group: *a\n    resource: *a\n    x: [*a" + strings.Repeat(", *a", 30) + "]\n", code: 413, reason: "RequestEntityTooLarge"},
		// Sizes and shapes.
		{name: "huge body", method: "POST", path: appsPath, body: appJSON(`{"name":"huge"}`, `{"replicas":1,"image":"nginx:1","x":"`+strings.Repeat("x", 4<<20)+`"}`), code: 413, reason: "RequestEntityTooLarge"},
		{name: "deeply nested arrays", method: "POST", path: appsPath, body: appJSON(`{"name":"deep"}`, `{"x":`+strings.Repeat("[", 100000)+strings.Repeat("]", 100000)+`}`), code: 400, reason: "BadRequest", message: "max depth"},
		{name: "deeply nested objects", method: "POST", path: appsPath, body: appJSON(`{"name":"deep"}`, `{"x":`+strings.Repeat(`{"a":`, 20000)+"1"+strings.Repeat("}", 20000)+`}`), code: 400, reason: "BadRequest", message: "max depth"},
		{name: "deeply nested merge patch", method: "PATCH", path: obj, ctype: "application/merge-patch+json", body: `{"spec":` + strings.Repeat(`{"a":`, 20000) + "1" + strings.Repeat("}", 20000) + `}`, code: 400, reason: "BadRequest"},
		{name: "empty body", method: "POST", path: appsPath, body: "", code: 400, reason: "BadRequest"},
		{name: "null body", method: "POST", path: appsPath, body: "null", code: 400, reason: "BadRequest", message: "Object 'Kind' is missing in 'null'"},
		{name: "two objects", method: "POST", path: appsPath, body: appJSON(`{"name":"two"}`, spec) + "{}", code: 400, reason: "BadRequest"},
		{name: "truncated JSON", method: "POST", path: appsPath, body: `{"apiVersion":"cloudnative.elide.dev/v1","kind":`, code: 400, reason: "BadRequest"},
		{name: "metadata a string", method: "POST", path: appsPath, body: appJSON(`"x"`, spec), code: 400, reason: "BadRequest"},
		{name: "metadata null", method: "POST", path: appsPath, body: appJSON(`null`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.name"}},
		{name: "spec null", method: "POST", path: appsPath, body: appJSON(`{"name":"x"}`, `null`), code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		{name: "spec an array", method: "POST", path: appsPath, body: appJSON(`{"name":"x"}`, `[]`), code: 422, reason: "Invalid", causes: []string{"spec"}},
		{name: "spec null by merge patch", method: "PATCH", path: obj, ctype: "application/merge-patch+json", body: `{"spec":null}`, code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		// Names and labels.
		{name: "no name", method: "POST", path: appsPath, body: appJSON(`{}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.name"}},
		{name: "upper-case name", method: "POST", path: appsPath, body: appJSON(`{"name":"Web"}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.name"}},
		{name: "name too long", method: "POST", path: appsPath, body: appJSON(`{"name":"`+strings.Repeat("a", 254)+`"}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.name"}},
		{name: "unicode name", method: "POST", path: appsPath, body: appJSON(`{"name":"wéb"}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.name"}},
		{name: "name a number", method: "POST", path: appsPath, body: appJSON(`{"name":7}`, spec), code: 400, reason: "BadRequest"},
		{name: "label key with spaces", method: "POST", path: appsPath, body: appJSON(`{"name":"l","labels":{"a b":"c"}}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.labels"}},
		{name: "unicode label value", method: "POST", path: appsPath, body: appJSON(`{"name":"l","labels":{"a":"日本"}}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.labels"}},
		{name: "label value too long", method: "POST", path: appsPath, body: appJSON(`{"name":"l","labels":{"a":"`+strings.Repeat("v", 64)+`"}}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.labels"}},
		{name: "label value a number", method: "POST", path: appsPath, body: appJSON(`{"name":"l","labels":{"a":1}}`, spec), code: 400, reason: "BadRequest"},
		{name: "null finalizer", method: "POST", path: appsPath, body: appJSON(`{"name":"f","finalizers":[null]}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.finalizers"}},
		{name: "empty owner reference", method: "POST", path: appsPath, body: appJSON(`{"name":"o","ownerReferences":[{}]}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.ownerReferences[0].uid"}},
		{name: "invalid namespace on the URL", method: "POST", path: "/apis/cloudnative.elide.dev/v1/namespaces/Bad_NS/applications", body: appJSON(`{"name":"x"}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.namespace"}},
		// The URL and the body disagree.
		{name: "apiVersion of another group", method: "POST", path: appsPath, body: strings.Replace(appJSON(`{"name":"x"}`, spec), "cloudnative.elide.dev/v1", "apps/v1", 1), code: 400, reason: "BadRequest"},
		{name: "apiVersion missing", method: "POST", path: appsPath, body: `{"kind":"Application","metadata":{"name":"x"},"spec":` + spec + `}`, code: 400, reason: "BadRequest"},
		{name: "kind of another resource", method: "POST", path: appsPath, body: strings.Replace(appJSON(`{"name":"x"}`, spec), `"Application"`, `"Widget"`, 1), code: 422, reason: "Invalid", causes: []string{"kind"}},
		{name: "namespace mismatch on create", method: "POST", path: appsPath, body: appJSON(`{"name":"x","namespace":"team-a"}`, spec), code: 400, reason: "BadRequest"},
		{name: "namespace mismatch on update", method: "PUT", path: obj, body: appJSON(`{"name":"keep-0","namespace":"team-a"}`, spec), code: 400, reason: "BadRequest"},
		{name: "name mismatch on update", method: "PUT", path: obj, body: appJSON(`{"name":"keep-1"}`, spec), code: 400, reason: "BadRequest"},
		{name: "uid mismatch on update", method: "PUT", path: obj, body: appJSON(`{"name":"keep-0","uid":"not-the-uid"}`, spec), code: 409, reason: "Conflict", message: "Precondition failed: UID"},
		{name: "stale resourceVersion", method: "PUT", path: obj, body: appJSON(`{"name":"keep-0","resourceVersion":"1"}`, spec), code: 409, reason: "Conflict"},
		{name: "resourceVersion not a number", method: "PUT", path: obj, body: appJSON(`{"name":"keep-0","resourceVersion":"abc"}`, spec), code: 422, reason: "Invalid", causes: []string{"metadata.resourceVersion"}},
		// Numbers and values.
		{name: "negative replicas", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":-1,"image":"nginx:1"}`), code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		{name: "fractional replicas", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":2.5,"image":"nginx:1"}`), code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		// Numbers beyond int64 and float64: refused as kube-apiserver's JSON decoding refuses them.
		{name: "replicas beyond float64", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":1e400,"image":"nginx:1"}`), code: 400, reason: "BadRequest", message: `Application in version "v1" cannot be handled as a Application: json: cannot unmarshal number 1e400 into Go value of type float64`},
		{name: "a 400-digit integer", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":`+strings.Repeat("9", 400)+`,"image":"nginx:1"}`), code: 400, reason: "BadRequest", message: "cannot unmarshal number 999"},
		{name: "a 400-digit integer where the schema keeps anything", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":1,"image":"nginx:1","config":{"n":`+strings.Repeat("9", 400)+`}}`), code: 400, reason: "BadRequest", message: "cannot unmarshal number 999"},
		{name: "a 400-digit integer in metadata of a built-in kind", method: "POST", path: "/api/v1/namespaces/default/configmaps", body: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n","generation":` + strings.Repeat("9", 400) + `}}`, code: 400, reason: "BadRequest", message: "into Go struct field ObjectMeta.metadata.generation of type int64"},
		{name: "1e400 by merge patch", method: "PATCH", path: obj, ctype: "application/merge-patch+json", body: `{"spec":{"replicas":1e400}}`, code: 400, reason: "BadRequest", message: "error decoding patch: json: cannot unmarshal number 1e400 into Go value of type float64"},
		{name: "1e400 by merge patch, fieldValidation=Ignore", method: "PATCH", path: obj + "?fieldValidation=Ignore", ctype: "application/merge-patch+json", body: `{"spec":{"replicas":1e400}}`, code: 400, reason: "BadRequest", message: "error decoding patch: json: cannot unmarshal number 1e400"},
		{name: "1e400 by JSON patch", method: "PATCH", path: obj, ctype: "application/json-patch+json", body: `[{"op":"replace","path":"/spec/replicas","value":1e400}]`, code: 400, reason: "BadRequest", message: "error decoding patch: json: cannot unmarshal number 1e400 into Go struct field jsonPatchOp.value of type float64"},
		{name: "replicas a string", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":"3","image":"nginx:1"}`), code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		{name: "replicas null", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":null,"image":"nginx:1"}`), code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		{name: "image null", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":1,"image":null}`), code: 422, reason: "Invalid", causes: []string{"spec.image"}},
		{name: "fractional replicas by patch", method: "PATCH", path: obj, ctype: "application/merge-patch+json", body: `{"spec":{"replicas":0.5}}`, code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		{name: "unicode image", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":1,"image":"nginx:日本"}`), code: 403, reason: "Forbidden", message: "invalid image reference"},
		{name: "NUL in image", method: "POST", path: appsPath, body: appJSON(`{"name":"n"}`, `{"replicas":1,"image":"nginx:1\u0000"}`), code: 403, reason: "Forbidden", message: "invalid image reference"},
		// Strict decoding.
		{name: "duplicate field, strict", method: "POST", path: appsPath + "?fieldValidation=Strict", body: appJSON(`{"name":"d"}`, `{"replicas":1,"replicas":2,"image":"nginx:1"}`), code: 400, reason: "BadRequest", message: `duplicate field "spec.replicas"`},
		{name: "unknown field, strict", method: "POST", path: appsPath + "?fieldValidation=Strict", body: appJSON(`{"name":"d"}`, `{"replicas":1,"image":"nginx:1","replica":2}`), code: 400, reason: "BadRequest", message: `unknown field "spec.replica"`},
		{name: "bad fieldValidation", method: "POST", path: appsPath + "?fieldValidation=Loud", body: appJSON(`{"name":"d"}`, spec), code: 422, reason: "Invalid", causes: []string{"fieldValidation"}},
		// Patches.
		{name: "JSON patch not an array", method: "PATCH", path: obj, ctype: "application/json-patch+json", body: `{"op":"add"}`, code: 400, reason: "BadRequest"},
		{name: "JSON patch unknown op", method: "PATCH", path: obj, ctype: "application/json-patch+json", body: `[{"op":"frob","path":"/spec"}]`, code: 422, reason: "Invalid"},
		{name: "JSON patch test of the root without a value", method: "PATCH", path: obj, ctype: "application/json-patch+json", body: `[{"op":"test","path":""}]`, code: 422, reason: "Invalid"},
		{name: "JSON patch replace of the root without a value", method: "PATCH", path: obj, ctype: "application/json-patch+json", body: `[{"op":"replace","path":""}]`, code: 422, reason: "Invalid"},
		{name: "JSON patch path to nowhere", method: "PATCH", path: obj, ctype: "application/json-patch+json", body: `[{"op":"replace","path":"/spec/a/b/c","value":1}]`, code: 422, reason: "Invalid"},
		{name: "JSON patch changes the kind", method: "PATCH", path: obj, ctype: "application/json-patch+json", body: `[{"op":"replace","path":"/kind","value":"Pod"}]`, code: 422, reason: "Invalid", causes: []string{"kind"}},
		{name: "merge patch not JSON", method: "PATCH", path: obj, ctype: "application/merge-patch+json", body: `{spec}`, code: 400, reason: "BadRequest"},
		{name: "merge patch changes the uid", method: "PATCH", path: obj, ctype: "application/merge-patch+json", body: `{"metadata":{"uid":"x"}}`, code: 422, reason: "Invalid", causes: []string{"metadata.uid"}, message: "field is immutable"},
		{name: "strategic merge patch on a custom resource", method: "PATCH", path: obj, ctype: "application/strategic-merge-patch+json", body: `{}`, code: 415, reason: "UnsupportedMediaType"},
		{name: "apply without a field manager", method: "PATCH", path: obj, ctype: "application/apply-patch+yaml", body: appJSON(`{"name":"keep-0"}`, spec), code: 422, reason: "Invalid", causes: []string{"fieldManager"}},
		{name: "patch of nothing", method: "PATCH", path: appsPath + "/missing", ctype: "application/merge-patch+json", body: `{}`, code: 404, reason: "NotFound"},
		// Reads and watches.
		{name: "bad limit", method: "GET", path: appsPath + "?limit=three", code: 400, reason: "BadRequest", message: "strconv.ParseInt"},
		// kube-apiserver's storage refuses it with an error that is no Status: a 500.
		{name: "bad resourceVersion on a watch", method: "GET", path: appsPath + "?watch=true&resourceVersion=abc", code: 500, message: `resourceVersion: Invalid value: "abc"`},
		{name: "bad field selector", method: "GET", path: appsPath + "?fieldSelector=spec.replicas%3D1", code: 400, reason: "BadRequest"},
		{name: "resourceVersionMatch without resourceVersion", method: "GET", path: appsPath + "?resourceVersionMatch=Exact", code: 422, reason: "Invalid", causes: []string{"resourceVersionMatch"}},
		{name: "sendInitialEvents without resourceVersionMatch", method: "GET", path: appsPath + "?watch=true&sendInitialEvents=true", code: 422, reason: "Invalid", causes: []string{"resourceVersionMatch"}},
		{name: "a write on a watch path", method: "POST", path: "/apis/cloudnative.elide.dev/v1/watch/namespaces/default/applications", ctype: "application/json", body: appJSON(`{"name":"w"}`, spec), code: 405, reason: "MethodNotAllowed"},
		{name: "unicode in a label selector", method: "GET", path: appsPath + "?labelSelector=a%3D%E6%97%A5", code: 400, reason: "BadRequest"},
	}
	runStatusCases(t, e, tests)
	after := snapshot(t, e)
	a, _ := json.Marshal(after)
	b, _ := json.Marshal(before)
	require.JSONEq(t, string(b), string(a), "nothing stored changed")
}

// TestOddInputsStoredAsKubernetesWould: inputs a real API server accepts are stored the way it
// stores them: integral numbers at integer fields as integers, null label and annotation values
// as "", a duplicated field as its last value with a warning, invalid UTF-8 as U+FFFD.
func TestOddInputsStoredAsKubernetesWould(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, metadata, spec string
		check                func(t *testing.T, obj map[string]any, r response)
	}{
		{"integral float", `{"name":"f"}`, `{"replicas":3.0,"image":"nginx:1"}`, func(t *testing.T, obj map[string]any, _ response) {
			assert.EqualValues(t, 3, field(obj, "spec", "replicas"))
		}},
		{"exponent", `{"name":"g"}`, `{"replicas":1e1,"image":"nginx:1"}`, func(t *testing.T, obj map[string]any, _ response) {
			assert.EqualValues(t, 10, field(obj, "spec", "replicas"))
		}},
		{"null label and annotation", `{"name":"n","labels":{"a":null},"annotations":{"b":null}}`, `{"replicas":1,"image":"nginx:1"}`, func(t *testing.T, obj map[string]any, _ response) {
			assert.Equal(t, "", field(obj, "metadata", "labels").(map[string]any)["a"])
			assert.Equal(t, "", field(obj, "metadata", "annotations").(map[string]any)["b"])
		}},
		{"duplicate field", `{"name":"d"}`, `{"replicas":1,"image":"nginx:1","replicas":4}`, func(t *testing.T, obj map[string]any, r response) {
			assert.EqualValues(t, 4, field(obj, "spec", "replicas"))
			assert.Contains(t, r.header.Values("Warning"), `299 - "duplicate field \"spec.replicas\""`)
		}},
		{"invalid UTF-8", `{"name":"u","annotations":{"b":"a` + "\xff" + `"}}`, `{"replicas":1,"image":"nginx:1"}`, func(t *testing.T, obj map[string]any, _ response) {
			assert.Equal(t, "a\uFFFD", field(obj, "metadata", "annotations").(map[string]any)["b"])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", appsPath, "application/json", appJSON(tt.metadata, tt.spec))
			require.Equal(t, 201, r.code, "body: %s", r.body)
			tt.check(t, r.json(t), r)
			name := field(r.json(t), "metadata", "name").(string)
			tt.check(t, e.do("GET", appsPath+"/"+name, "", "").json(t), r)
		})
	}
}
