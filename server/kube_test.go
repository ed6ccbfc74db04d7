package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func (e *env) doAccept(method, path, accept string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.http.URL+path, nil)
	require.NoError(e.t, err)
	req.Header.Set("Accept", accept)
	resp, err := e.http.Client().Do(req)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	buf, err := io.ReadAll(resp.Body)
	require.NoError(e.t, err)
	return response{code: resp.StatusCode, header: resp.Header, body: buf}
}

const tableAccept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"

func TestDiscovery(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	v := e.do("GET", "/version", "", "").json(t)
	assert.Equal(t, "1", v["major"])
	assert.Equal(t, "37", v["minor"])
	assert.Equal(t, "v1.37.2", v["gitVersion"], "the release of the k8s.io modules built in")
	assert.Equal(t, []any{"v1"}, e.do("GET", "/api", "", "").json(t)["versions"])
	groups := e.do("GET", "/apis", "", "").json(t)
	assert.Equal(t, "APIGroupList", groups["kind"])
	var names []string
	for _, g := range groups["groups"].([]any) {
		names = append(names, g.(map[string]any)["name"].(string))
	}
	assert.ElementsMatch(t, []string{"admissionregistration.k8s.io", "apiextensions.k8s.io", "apps", "authentication.k8s.io", "authorization.k8s.io", "batch",
		"cloudnative.elide.dev", "controllers.opemu.dev", "coordination.k8s.io", "discovery.k8s.io", "events.k8s.io", "faults.opemu.dev", "networking.k8s.io", "policy", "rbac.authorization.k8s.io"}, names)
	rl := e.do("GET", "/apis/cloudnative.elide.dev/v1", "", "").json(t)
	var res []string
	for _, r := range rl["resources"].([]any) {
		m := r.(map[string]any)
		res = append(res, m["name"].(string))
		if m["name"] == "applications/scale" {
			assert.Equal(t, "autoscaling", m["group"])
			assert.Equal(t, "Scale", m["kind"])
		}
	}
	assert.Equal(t, []string{"applications", "applications/status", "applications/scale"}, res)
	assert.Equal(t, http.StatusOK, e.do("GET", "/apis/cloudnative.elide.dev", "", "").code)
	assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1", "", "").code)
	notFound := e.do("GET", "/apis/nope.example.com/v1", "", "")
	assert.Equal(t, http.StatusNotFound, notFound.code)
	assert.Equal(t, "404 page not found\n", string(notFound.body), "an unknown group: kube-apiserver's plain-text page")

	// OpenAPI: one document per group-version; its hash changes with the CRDs.
	root := e.do("GET", "/openapi/v3", "", "").json(t)
	paths := root["paths"].(map[string]any)
	url := paths["apis/cloudnative.elide.dev/v1"].(map[string]any)["serverRelativeURL"].(string)
	doc := e.do("GET", url, "", "").json(t)
	assert.Contains(t, doc["paths"], "/apis/cloudnative.elide.dev/v1/namespaces/{namespace}/applications/{name}")
	assert.Contains(t, doc["components"].(map[string]any)["schemas"], "dev.elide.cloudnative.v1.Application")
	crd := strings.ReplaceAll(widgetCRD, "WIDGET_EXTRA", "")
	require.Equal(t, http.StatusCreated, e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/yaml", crd).code)
	root2 := e.do("GET", "/openapi/v3", "", "").json(t)["paths"].(map[string]any)
	assert.Contains(t, root2, "apis/example.com/v1")
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {kind: Widget, plural: widgets}
  versions:
  - name: v1
    served: true
    storage: true
    additionalPrinterColumns:
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Color, type: string, jsonPath: .spec.color, priority: 1}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            WIDGET_EXTRA
            properties:
              size: {type: integer, default: 1}
              color: {type: string}
`

func TestCRDLifecycle(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	withCEL := strings.ReplaceAll(widgetCRD, "WIDGET_EXTRA", `x-kubernetes-validations: [{rule: "self.size > 0"}]`)
	r := e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/yaml", withCEL)
	require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
	assert.Empty(t, r.header.Values("Warning"), "CEL rules are evaluated: no Warning")
	c := r.json(t)
	var conds []string
	for _, cond := range field(c, "status", "conditions").([]any) {
		m := cond.(map[string]any)
		conds = append(conds, m["type"].(string)+"="+m["status"].(string))
	}
	assert.ElementsMatch(t, []string{"Established=True", "NamesAccepted=True"}, conds)

	wpath := "/apis/example.com/v1/namespaces/default/widgets"
	w := e.do("POST", wpath, "application/json", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1"},"spec":{"color":"red"}}`)
	require.Equal(t, http.StatusCreated, w.code, "body: %s", w.body)
	assert.EqualValues(t, 1, field(w.json(t), "spec", "size"), "the schema's default")
	status(t, e.do("POST", wpath, "application/json", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w2"},"spec":{"size":"big"}}`), 422, "Invalid")
	rule := status(t, e.do("POST", wpath, "application/json", `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w3"},"spec":{"size":0}}`), 422, "Invalid")
	assert.Equal(t, []string{"spec"}, causes(rule), "the CRD's CEL rule")
	assert.Contains(t, rule["message"], "failed rule: self.size > 0")

	tbl := e.doAccept("GET", wpath, tableAccept).json(t)
	assert.Equal(t, "Table", tbl["kind"])
	var cols []string
	for _, cd := range tbl["columnDefinitions"].([]any) {
		cols = append(cols, cd.(map[string]any)["name"].(string))
	}
	assert.Equal(t, []string{"Name", "Size", "Color"}, cols)
	row := tbl["rows"].([]any)[0].(map[string]any)
	assert.Equal(t, []any{"w1", float64(1), "red"}, row["cells"])
	assert.Equal(t, "PartialObjectMetadata", field(row, "object", "kind"))

	// A watch on the kind ends when the CRD goes; the objects go with it.
	ws := e.kubeWatch(wpath + "?watch=true")
	typ, _ := ws.next()
	assert.Equal(t, "ADDED", typ)
	status(t, e.do("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/applications.cloudnative.elide.dev", "", ""), 403, "Forbidden")
	require.Equal(t, http.StatusOK, e.do("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.example.com", "", "").code)
	typ, _ = ws.next()
	assert.Equal(t, "DELETED", typ)
	assert.True(t, ws.closed(), "the watch on the deleted kind ends")
	gone := e.do("GET", wpath, "", "")
	assert.Equal(t, http.StatusNotFound, gone.code)
	assert.Equal(t, "404 page not found\n", string(gone.body), "a group no CRD serves any more: kube-apiserver's plain-text page")
}

func TestTablesForBuiltins(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1")).code)
	cols := func(path string) []string {
		tbl := e.doAccept("GET", path, tableAccept).json(t)
		var out []string
		for _, cd := range tbl["columnDefinitions"].([]any) {
			if cd.(map[string]any)["priority"] == nil || cd.(map[string]any)["priority"] == float64(0) {
				out = append(out, cd.(map[string]any)["name"].(string))
			}
		}
		return out
	}
	assert.Equal(t, []string{"Name", "Replicas", "Ready", "Phase", "Age"}, cols(appsPath))
	assert.Equal(t, []string{"Last Seen", "Type", "Reason", "Object", "Message"}, cols("/api/v1/namespaces/default/events"))
	assert.Equal(t, []string{"Name", "Status", "Age"}, cols("/api/v1/namespaces"))
	assert.Equal(t, []string{"Name", "Holder", "Age"}, cols("/apis/coordination.k8s.io/v1/leases"))
	assert.Equal(t, []string{"Name", "Created At"}, cols("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"))
	one := e.doAccept("GET", appsPath+"/web", tableAccept).json(t)
	assert.Len(t, one["rows"], 1)
	plain := e.doAccept("GET", appsPath+"/web", "application/json").json(t)
	assert.Equal(t, "Application", plain["kind"])
}

func TestDeleteCollectionAndBuiltinWrites(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, n := range []string{"a", "b"} {
		require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app(n, 1, "nginx:1")).code)
	}
	held := `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"c","finalizers":["x/y"]},"spec":{"replicas":1,"image":"nginx:1"}}`
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", held).code)
	r := e.do("DELETE", appsPath, "", "")
	require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
	l := r.json(t)
	assert.Equal(t, "ApplicationList", l["kind"])
	assert.Len(t, l["items"], 3)
	left := e.do("GET", appsPath, "", "").json(t)["items"].([]any)
	require.Len(t, left, 1, "the finalizer holds c")
	assert.NotEmpty(t, field(left[0].(map[string]any), "metadata", "deletionTimestamp"))
	assert.Equal(t, []string{"Deleted", "Deleted", "Deleted"}, eventReasons(t, e, "?reason=Deleted"))

	// Leases: full CRUD with optimistic concurrency, strategic merge patch accepted.
	lp := "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	lease := e.do("POST", lp, "application/json", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l1"},"spec":{"holderIdentity":"a"}}`)
	require.Equal(t, http.StatusCreated, lease.code, "body: %s", lease.body)
	status(t, e.do("POST", lp, "application/json", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l1"},"spec":{}}`), 409, "AlreadyExists")
	status(t, e.do("PUT", lp+"/l1", "application/json", `{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"l1","resourceVersion":"1"},"spec":{"holderIdentity":"b"}}`), 409, "Conflict")
	smp := e.do("PATCH", lp+"/l1", "application/strategic-merge-patch+json", `{"spec":{"holderIdentity":"b"}}`)
	require.Equal(t, http.StatusOK, smp.code, "body: %s", smp.body)
	assert.Equal(t, "b", field(smp.json(t), "spec", "holderIdentity"))

	// Namespaces: created with Active, Terminating semantics on delete; default is protected.
	ns := e.do("POST", "/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team"}}`)
	require.Equal(t, http.StatusCreated, ns.code, "body: %s", ns.body)
	assert.Equal(t, "Active", field(ns.json(t), "status", "phase"))
	status(t, e.do("DELETE", "/api/v1/namespaces/default", "", ""), 403, "Forbidden")
}
