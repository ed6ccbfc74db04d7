package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCreateGetListDelete(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.do("POST", appsPath, "application/json", app("my-app", 3, "nginx:latest"))
	require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
	obj := r.json(t)
	assert.Equal(t, "RollingUpdate", field(obj, "spec", "strategy"), "defaulted by the schema and the defaulter")
	assert.Equal(t, "elide-operator", field(obj, "metadata", "labels").(map[string]any)["app.kubernetes.io/managed-by"])
	assert.Equal(t, "true", field(obj, "metadata", "annotations").(map[string]any)["elide.dev/webhook-mutated"])
	assert.EqualValues(t, 1, field(obj, "metadata", "generation"))
	assert.NotEmpty(t, field(obj, "metadata", "uid"))
	assert.NotEmpty(t, field(obj, "metadata", "resourceVersion"))
	assert.Equal(t, "default", field(obj, "metadata", "namespace"))
	assert.Len(t, r.header.Values("Warning"), 2, "no limits and the latest tag")

	got := e.do("GET", appsPath+"/my-app", "", "")
	require.Equal(t, http.StatusOK, got.code)
	assert.JSONEq(t, string(r.body), string(got.body))

	list := e.do("GET", appsPath, "", "")
	require.Equal(t, http.StatusOK, list.code)
	l := list.json(t)
	assert.Equal(t, "ApplicationList", l["kind"])
	assert.Equal(t, "cloudnative.elide.dev/v1", l["apiVersion"])
	assert.NotEmpty(t, field(l, "metadata", "resourceVersion"))
	assert.Len(t, l["items"], 1)

	all := e.do("GET", "/apis/cloudnative.elide.dev/v1/applications", "", "")
	require.Equal(t, http.StatusOK, all.code)
	assert.Len(t, all.json(t)["items"], 1)

	del := e.do("DELETE", appsPath+"/my-app", "", "")
	require.Equal(t, http.StatusOK, del.code, "body: %s", del.body)
	d := del.json(t)
	assert.Equal(t, "Success", d["status"])
	assert.Equal(t, "my-app", field(d, "details", "name"))
	status(t, e.do("GET", appsPath+"/my-app", "", ""), http.StatusNotFound, "NotFound")
}

func TestWriteErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("exists", 1, "nginx:1.27")).code)
	tests := []statusCase{
		{name: "replicas over 100", method: "POST", path: appsPath, body: app("invalid", 150, "nginx:latest"), code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		{name: "missing image", method: "POST", path: appsPath, body: app("invalid", 3, ""), code: 422, reason: "Invalid", causes: []string{"spec.image"}},
		{name: "negative replicas", method: "POST", path: appsPath, body: app("invalid", -1, "nginx:1"), code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		{name: "fractional replicas", method: "POST", path: appsPath, body: app("invalid", 2.5, "nginx:1"), code: 422, reason: "Invalid", causes: []string{"spec.replicas"}},
		{name: "spec null", method: "POST", path: appsPath, body: `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"x"},"spec":null}`, code: 422, reason: "Invalid"},
		{name: "invalid name", method: "POST", path: appsPath, body: app("Not_A_Name", 1, "nginx:1"), code: 422, reason: "Invalid", causes: []string{"metadata.name"}},
		{name: "invalid label", method: "POST", path: appsPath, body: `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"x","labels":{"bad key!":"v"}},"spec":{"replicas":1,"image":"nginx:1"}}`, code: 422, reason: "Invalid", causes: []string{"metadata.labels"}},
		{name: "blocked image", method: "POST", path: appsPath, body: app("ubuntu", 1, "ubuntu:22.04"), code: 403, reason: "Forbidden", message: "Base image 'ubuntu' is not allowed"},
		{name: "registry not allowed", method: "POST", path: appsPath, body: app("quay", 1, "quay.io/org/app:1"), code: 403, reason: "Forbidden"},
		{name: "duplicate", method: "POST", path: appsPath, body: app("exists", 1, "nginx:1.27"), code: 409, reason: "AlreadyExists", message: `applications.cloudnative.elide.dev "exists" already exists`},
		{name: "stale resourceVersion", method: "PUT", path: appsPath + "/exists", body: `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"exists","resourceVersion":"1"},"spec":{"replicas":2,"image":"nginx:1.27"}}`, code: 409, reason: "Conflict"},
		{name: "update missing", method: "PUT", path: appsPath + "/missing", body: app("missing", 1, "nginx:1"), code: 404, reason: "NotFound"},
		{name: "name mismatch", method: "PUT", path: appsPath + "/exists", body: app("other", 1, "nginx:1"), code: 400, reason: "BadRequest"},
		{name: "namespace mismatch", method: "POST", path: appsPath, body: `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"x","namespace":"other"},"spec":{"replicas":1,"image":"nginx:1"}}`, code: 400, reason: "BadRequest"},
		{name: "wrong apiVersion", method: "POST", path: appsPath, body: `{"apiVersion":"v1","kind":"Application","metadata":{"name":"x"},"spec":{"replicas":1,"image":"nginx:1"}}`, code: 400, reason: "BadRequest"},
		{name: "wrong kind", method: "POST", path: appsPath, body: `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Pod","metadata":{"name":"x"},"spec":{"replicas":1,"image":"nginx:1"}}`, code: 422, reason: "Invalid", causes: []string{"kind"}},
		{name: "malformed JSON", method: "POST", path: appsPath, body: `{"apiVersion":`, code: 400, reason: "BadRequest"},
		{name: "JSON array", method: "POST", path: appsPath, body: `[1,2]`, code: 400, reason: "BadRequest"},
		{name: "empty body", method: "POST", path: appsPath, body: ``, code: 400, reason: "BadRequest"},
		{name: "unsupported content type", method: "POST", path: appsPath, ctype: "text/plain", body: app("x", 1, "nginx:1"), code: 415, reason: "UnsupportedMediaType"},
		{name: "strict unknown field", method: "POST", path: appsPath + "?fieldValidation=Strict", body: `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"x"},"spec":{"replicas":1,"image":"nginx:1","foo":1}}`, code: 400, reason: "BadRequest", message: `strict decoding error: unknown field "spec.foo"`},
		{name: "strategic merge patch on a custom resource", method: "PATCH", path: appsPath + "/exists", ctype: "application/strategic-merge-patch+json", body: `{}`, code: 415, reason: "UnsupportedMediaType"},
		{name: "json patch test fails", method: "PATCH", path: appsPath + "/exists", ctype: "application/json-patch+json", body: `[{"op":"test","path":"/spec/replicas","value":99}]`, code: 422, reason: "Invalid"},
		{name: "malformed json patch", method: "PATCH", path: appsPath + "/exists", ctype: "application/json-patch+json", body: `{"op":"x"}`, code: 400, reason: "BadRequest"},
		{name: "unknown resource", method: "GET", path: "/api/v1/namespaces/default/widgets", code: 404, reason: "NotFound"},
		{name: "wrong method", method: "DELETE", path: "/healthz", code: 405, reason: "MethodNotAllowed"},
		{name: "bad dryRun", method: "POST", path: appsPath + "?dryRun=Some", body: app("x", 1, "nginx:1"), code: 422, reason: "Invalid", causes: []string{"dryRun"}},
		{name: "bad label selector", method: "GET", path: appsPath + "?labelSelector=a%20in%20(", code: 400, reason: "BadRequest"},
		{name: "bad continue", method: "GET", path: appsPath + "?limit=1&continue=not-a-token!", code: 400, reason: "BadRequest"},
		{name: "future resourceVersion", method: "GET", path: appsPath + "?resourceVersion=99999999999999999", code: 504, reason: "Timeout"},
	}
	runStatusCases(t, e, tests)
	// Nothing stored was lost or changed by the rejected writes.
	list := e.do("GET", appsPath, "", "").json(t)
	require.Len(t, list["items"], 1)
	assert.EqualValues(t, 1, field(list["items"].([]any)[0].(map[string]any), "spec", "replicas"))
}

// statusCase is one request that must be answered with a failure Status.
type statusCase struct {
	name, method, path, ctype, body string
	code                            int
	reason                          string
	causes                          []string // each a prefix of a field in details.causes
	message                         string   // a part of the message
}

// runStatusCases sends each case (JSON unless it says otherwise) and checks its Status.
func runStatusCases(t *testing.T, e *env, cases []statusCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			ctype := tt.ctype
			if ctype == "" && tt.body != "" {
				ctype = "application/json"
			}
			m := status(t, e.do(tt.method, tt.path, ctype, tt.body), tt.code, tt.reason)
			for _, c := range tt.causes {
				got := causes(m)
				assert.True(t, containsPrefix(got, c), "causes %v should name %s", got, c)
			}
			if tt.message != "" {
				assert.Contains(t, m["message"], tt.message)
			}
		})
	}
}

func containsPrefix(l []string, p string) bool {
	for _, s := range l {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

func TestUpdateSemantics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	created := e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1.27")).json(t)
	rv := field(created, "metadata", "resourceVersion").(string)
	uid := field(created, "metadata", "uid")

	// PUT without resourceVersion is unconditional; spec changed, so generation moves.
	put := e.do("PUT", appsPath+"/web", "application/json", app("web", 2, "nginx:1.27"))
	require.Equal(t, http.StatusOK, put.code, "body: %s", put.body)
	p := put.json(t)
	assert.EqualValues(t, 2, field(p, "metadata", "generation"))
	assert.Equal(t, uid, field(p, "metadata", "uid"), "uid is kept")
	assert.Equal(t, field(created, "metadata", "creationTimestamp"), field(p, "metadata", "creationTimestamp"))
	assert.NotEqual(t, rv, field(p, "metadata", "resourceVersion"))

	// A label change is not a spec change.
	lab := e.do("PATCH", appsPath+"/web", "application/merge-patch+json", `{"metadata":{"labels":{"tier":"web"}}}`)
	require.Equal(t, http.StatusOK, lab.code, "body: %s", lab.body)
	assert.EqualValues(t, 2, field(lab.json(t), "metadata", "generation"))

	// The same PUT again changes nothing: same resourceVersion, no new write.
	before := field(e.do("GET", appsPath+"/web", "", "").json(t), "metadata", "resourceVersion")
	same := e.do("PATCH", appsPath+"/web", "application/merge-patch+json", `{"spec":{"replicas":2}}`)
	require.Equal(t, http.StatusOK, same.code)
	assert.Equal(t, before, field(same.json(t), "metadata", "resourceVersion"), "a no-op write is not a write")

	// A PUT with the current resourceVersion succeeds.
	cur := e.do("GET", appsPath+"/web", "", "").json(t)
	cur["spec"].(map[string]any)["replicas"] = 4
	body := mustMarshal(t, cur)
	ok := e.do("PUT", appsPath+"/web", "application/json", body)
	require.Equal(t, http.StatusOK, ok.code, "body: %s", ok.body)
	assert.EqualValues(t, 3, field(ok.json(t), "metadata", "generation"))
	// Reusing it is now stale.
	status(t, e.do("PUT", appsPath+"/web", "application/json", body), http.StatusConflict, "Conflict")

	// JSON patch.
	jp := e.do("PATCH", appsPath+"/web", "application/json-patch+json", `[{"op":"replace","path":"/spec/image","value":"nginx:1.28"}]`)
	require.Equal(t, http.StatusOK, jp.code, "body: %s", jp.body)
	assert.Equal(t, "nginx:1.28", field(jp.json(t), "spec", "image"))

	// PUT on the main resource ignores status; /status changes only status.
	st := e.do("PUT", appsPath+"/web/status", "application/json",
		`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"web"},"spec":{"replicas":99,"image":"x"},"status":{"phase":"Running","replicas":4,"readyReplicas":4}}`)
	require.Equal(t, http.StatusOK, st.code, "body: %s", st.body)
	s := st.json(t)
	assert.Equal(t, "Running", field(s, "status", "phase"))
	assert.EqualValues(t, 4, field(s, "spec", "replicas"), "spec is not written through /status")
	assert.EqualValues(t, 4, field(s, "metadata", "generation"), "a status write does not move generation")
	main := e.do("PATCH", appsPath+"/web", "application/merge-patch+json", `{"status":{"phase":"Failed"}}`)
	require.Equal(t, http.StatusOK, main.code)
	assert.Equal(t, "Running", field(main.json(t), "status", "phase"), "status is not written through the main resource")
	bad := e.do("PATCH", appsPath+"/web/status", "application/merge-patch+json", `{"status":{"phase":"Sleeping"}}`)
	status(t, bad, 422, "Invalid")
}

func TestScaleSubresource(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 2, "nginx:1.27")).code)
	sc := e.do("GET", appsPath+"/web/scale", "", "")
	require.Equal(t, http.StatusOK, sc.code)
	s := sc.json(t)
	assert.Equal(t, "autoscaling/v1", s["apiVersion"])
	assert.Equal(t, "Scale", s["kind"])
	assert.EqualValues(t, 2, field(s, "spec", "replicas"))

	up := e.do("PATCH", appsPath+"/web/scale", "application/merge-patch+json", `{"spec":{"replicas":5}}`)
	require.Equal(t, http.StatusOK, up.code, "body: %s", up.body)
	assert.EqualValues(t, 5, field(up.json(t), "spec", "replicas"))
	got := e.do("GET", appsPath+"/web", "", "").json(t)
	assert.EqualValues(t, 5, field(got, "spec", "replicas"))
	assert.EqualValues(t, 2, field(got, "metadata", "generation"))

	put := e.do("PUT", appsPath+"/web/scale", "application/json", `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web"},"spec":{"replicas":7}}`)
	require.Equal(t, http.StatusOK, put.code, "body: %s", put.body)
	assert.EqualValues(t, 7, field(put.json(t), "spec", "replicas"))

	status(t, e.do("PATCH", appsPath+"/web/scale", "application/merge-patch+json", `{"spec":{"replicas":101}}`), 422, "Invalid")
	status(t, e.do("PATCH", appsPath+"/web/scale", "application/merge-patch+json", `{"spec":{"replicas":-1}}`), 422, "Invalid")
}

func TestDryRunStoresNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	rv := e.store.ResourceVersion()
	r := e.do("POST", appsPath+"?dryRun=All", "application/json", app("web", 1, "nginx:1"))
	require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
	assert.Nil(t, field(r.json(t), "metadata", "resourceVersion"), "a dry-run create has no resourceVersion")
	assert.Equal(t, rv, e.store.ResourceVersion(), "nothing was written")
	status(t, e.do("GET", appsPath+"/web", "", ""), 404, "NotFound")
	// Into a namespace that does not exist, a dry run is the create's 404 (kube's admission
	// runs for dry runs too), and creates no namespace.
	status(t, e.do("POST", "/apis/cloudnative.elide.dev/v1/namespaces/dry/applications?dryRun=All", "application/json", app("web", 1, "nginx:1")), 404, "NotFound")
	assert.Equal(t, rv, e.store.ResourceVersion(), "nothing was written")
	status(t, e.do("GET", "/api/v1/namespaces/dry", "", ""), 404, "NotFound")
}

func TestYAMLBody(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	y := "apiVersion: cloudnative.elide.dev/v1\nkind: Application\nmetadata:\n  name: from-yaml\nspec:\n  replicas: 2\n  image: gcr.io/distroless/static:nonroot\n"
	r := e.do("POST", appsPath, "application/yaml", y)
	require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
	assert.EqualValues(t, 2, field(r.json(t), "spec", "replicas"))
	status(t, e.do("POST", appsPath, "application/yaml", "a: [unclosed"), 400, "BadRequest")
}

func TestFieldValidationWarn(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"x"},"spec":{"replicas":1,"image":"nginx:1.27","foo":1,"resources":{"limits":{"cpu":"1"}}}}`
	r := e.do("POST", appsPath, "application/json", body)
	require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
	assert.Contains(t, r.header.Values("Warning"), `299 - "unknown field \"spec.foo\""`)
	assert.Nil(t, field(r.json(t), "spec", "foo"), "pruned")
	r = e.do("POST", appsPath+"?fieldValidation=Ignore", "application/json", strings.Replace(body, `"x"`, `"y"`, 1))
	require.Equal(t, http.StatusCreated, r.code)
	assert.Empty(t, r.header.Values("Warning"))
}

func TestFinalizerDeletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body := `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"fin","finalizers":["example.com/hold"]},"spec":{"replicas":1,"image":"nginx:1.27"}}`
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", body).code)
	del := e.do("DELETE", appsPath+"/fin", "", "")
	require.Equal(t, http.StatusOK, del.code)
	d := del.json(t)
	assert.Equal(t, "Application", d["kind"], "a held object is returned, not a Status")
	assert.NotEmpty(t, field(d, "metadata", "deletionTimestamp"))
	status(t, e.do("PATCH", appsPath+"/fin", "application/merge-patch+json", `{"metadata":{"finalizers":["example.com/hold","example.com/new"]}}`), 422, "Invalid")
	rm := e.do("PATCH", appsPath+"/fin", "application/merge-patch+json", `{"metadata":{"finalizers":null}}`)
	require.Equal(t, http.StatusOK, rm.code, "body: %s", rm.body)
	status(t, e.do("GET", appsPath+"/fin", "", ""), 404, "NotFound")
}

func TestDeletePreconditions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1")).code)
	status(t, e.do("DELETE", appsPath+"/web", "application/json", `{"preconditions":{"resourceVersion":"1"}}`), 409, "Conflict")
	status(t, e.do("DELETE", appsPath+"/web", "application/json", `{"preconditions":`), 400, "BadRequest")
	require.Equal(t, http.StatusOK, e.do("DELETE", appsPath+"/web", "application/json", `{"propagationPolicy":"Background"}`).code)
}

// TestDeletePropagationPolicy: DeleteOptions' propagationPolicy and the legacy orphanDependents,
// in the body or (without one) the query, set the garbage collector's finalizers; bad ones are
// a 422 naming DeleteOptions, as kube-apiserver answers.
func TestDeletePropagationPolicy(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cms := "/api/v1/namespaces/default/configmaps"
	for _, tt := range []struct {
		name, query, body string
		finalizer         string
	}{
		{"foreground body", "", `{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Foreground"}`, "foregroundDeletion"},
		{"orphan body", "", `{"propagationPolicy":"Orphan"}`, "orphan"},
		{"orphanDependents body", "", `{"orphanDependents":true}`, "orphan"},
		{"foreground query", "?propagationPolicy=Foreground", "", "foregroundDeletion"},
		{"orphanDependents query", "?orphanDependents=true", "", "orphan"},
		{"background", "?propagationPolicy=Background", "", ""},
		{"orphanDependents false", "", `{"orphanDependents":false}`, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			name := strings.ReplaceAll(tt.name, " ", "-")
			name = strings.ToLower(name)
			require.Equal(t, http.StatusCreated, e.do("POST", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+name+`"}}`).code)
			ctype := ""
			if tt.body != "" {
				ctype = "application/json"
			}
			del := e.do("DELETE", cms+"/"+name+tt.query, ctype, tt.body)
			require.Equal(t, http.StatusOK, del.code, "body: %s", del.body)
			d := del.json(t)
			if tt.finalizer == "" {
				assert.Equal(t, "Status", d["kind"], "removed at once")
				return
			}
			assert.Equal(t, "ConfigMap", d["kind"], "marked, not removed")
			assert.Equal(t, []any{tt.finalizer}, field(d, "metadata", "finalizers"))
			assert.NotEmpty(t, field(d, "metadata", "deletionTimestamp"))
		})
	}
	require.Equal(t, http.StatusCreated, e.do("POST", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad"}}`).code)
	runStatusCases(t, e, []statusCase{
		{name: "unknown policy", method: "DELETE", path: cms + "/bad", body: `{"propagationPolicy":"Sometimes"}`, code: 422, reason: "Invalid",
			causes: []string{"propagationPolicy"}, message: `DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "Sometimes"`},
		{name: "unknown policy in the query", method: "DELETE", path: cms + "/bad?propagationPolicy=sometimes", code: 422, reason: "Invalid", causes: []string{"propagationPolicy"}},
		{name: "both", method: "DELETE", path: cms + "/bad", body: `{"propagationPolicy":"Orphan","orphanDependents":true}`, code: 422, reason: "Invalid",
			message: "orphanDependents and deletionPropagation cannot be both set"},
		{name: "orphanDependents not a boolean", method: "DELETE", path: cms + "/bad?orphanDependents=maybe", code: 400, reason: "BadRequest"},
	})
	require.Equal(t, http.StatusOK, e.do("GET", cms+"/bad", "", "").code, "nothing was deleted")
}

func TestPaging(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := range 5 {
		require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app(fmt.Sprintf("app-%d", i), 1, "nginx:1")).code)
	}
	var names []string
	path := appsPath + "?limit=2"
	var listRV any
	for range 5 {
		page := e.do("GET", path, "", "").json(t)
		if listRV == nil {
			listRV = field(page, "metadata", "resourceVersion")
			// A write between pages does not change the list's version.
			require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("zzz", 1, "nginx:1")).code)
		}
		assert.Equal(t, listRV, field(page, "metadata", "resourceVersion"))
		for _, it := range page["items"].([]any) {
			names = append(names, field(it.(map[string]any), "metadata", "name").(string))
		}
		cont, _ := field(page, "metadata", "continue").(string)
		if cont == "" {
			break
		}
		path = appsPath + "?limit=2&continue=" + cont
	}
	assert.Equal(t, []string{"app-0", "app-1", "app-2", "app-3", "app-4"}, names, "pages show the list as it was at the first page's version")
}

func TestSelectors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, n := range []string{"a", "b"} {
		body := fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"%s","labels":{"tier":"%s"}},"spec":{"replicas":1,"image":"nginx:1"}}`, n, n)
		require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", body).code)
	}
	assert.Len(t, e.do("GET", appsPath+"?labelSelector=tier%3Da", "", "").json(t)["items"], 1)
	assert.Len(t, e.do("GET", appsPath+"?labelSelector=tier+in+(a,b)", "", "").json(t)["items"], 2)
	assert.Len(t, e.do("GET", appsPath+"?fieldSelector=metadata.name%3Db", "", "").json(t)["items"], 1)
	assert.Len(t, e.do("GET", "/apis/cloudnative.elide.dev/v1/applications?fieldSelector=metadata.namespace%3Dother", "", "").json(t)["items"], 0)
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := jsonMarshal(v)
	require.NoError(t, err)
	return string(b)
}

// Finalizers and delete preconditions of a custom resource, worded as kube-apiserver words
// them: a warning for a finalizer name without a domain and path, the "no new finalizers"
// cause (given twice, as kube-apiserver checks an update's metadata twice), and failed
// preconditions naming the kind.
func TestCustomResourceFinalizersAndPreconditions(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	spec := `{"replicas":1,"image":"nginx:1"}`
	r := e.do("POST", appsPath, "application/json", appJSON(`{"name":"f","finalizers":["hold","cloudnative.elide.dev/keep"]}`, spec))
	require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
	assert.Contains(t, r.header.Values("Warning"),
		`299 - "metadata.finalizers: \"hold\": prefer a domain-qualified finalizer name to avoid accidental conflicts with other finalizer writers"`)
	assert.NotContains(t, strings.Join(r.header.Values("Warning"), "\n"), "cloudnative.elide.dev/keep", "a domain-qualified name with a path gets no warning")
	uid := field(r.json(t), "metadata", "uid").(string)

	c := status(t, e.do("DELETE", appsPath+"/f", "application/json", `{"preconditions":{"uid":"00000000-0000-0000-0000-000000000000"}}`), 409, "Conflict")
	assert.Equal(t, "Application", field(c, "details", "kind"))
	assert.Contains(t, c["message"], `Operation cannot be fulfilled on Application.cloudnative.elide.dev "f": the UID in the precondition`)
	c = status(t, e.do("DELETE", appsPath+"/f", "application/json", `{"preconditions":{"resourceVersion":"1"}}`), 409, "Conflict")
	assert.Contains(t, c["message"], "the ResourceVersion in the precondition (1) does not match")

	require.Equal(t, http.StatusOK, e.do("DELETE", appsPath+"/f", "application/json", `{"preconditions":{"uid":"`+uid+`"}}`).code)
	c = status(t, e.do("PATCH", appsPath+"/f", "application/merge-patch+json", `{"metadata":{"finalizers":["hold","cloudnative.elide.dev/keep","cloudnative.elide.dev/new"]}}`), 422, "Invalid")
	const cause = `no new finalizers can be added if the object is being deleted, found new finalizers []string{"cloudnative.elide.dev/new"}`
	assert.Equal(t, `Application.cloudnative.elide.dev "f" is invalid: metadata.finalizers: Forbidden: `+cause, c["message"])
	assert.Equal(t, []string{"metadata.finalizers", "metadata.finalizers"}, causes(c))
}
