package server_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGenerateName: a create with generateName and no name gets prefix + 5 characters, for
// built-in kinds and custom resources alike, and is validated under that name.
func TestGenerateName(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	tests := []struct {
		name, path, ctype, body string
		want                    string // a regexp for the generated name
	}{
		{"namespace", "/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"generateName":"envtest-"}}`, `^envtest-[a-z0-9]{5}$`},
		{"custom resource", appsPath, "application/json", `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"generateName":"web-"},"spec":{"replicas":1,"image":"nginx:1.27"}}`, `^web-[a-z0-9]{5}$`},
		{"yaml", "/apis/coordination.k8s.io/v1/namespaces/default/leases", "application/yaml", "apiVersion: coordination.k8s.io/v1\nkind: Lease\nmetadata: {generateName: lock-}\n", `^lock-[a-z0-9]{5}$`},
		{"dry run", "/api/v1/namespaces?dryRun=All", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"generateName":"dry-"}}`, `^dry-[a-z0-9]{5}$`},
		{"long prefix is cut to fit a label", "/api/v1/namespaces/default/configmaps", "application/json", `{"metadata":{"generateName":"` + strings.Repeat("a", 70) + `"}}`, `^a{58}[a-z0-9]{5}$`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do("POST", tt.path, tt.ctype, tt.body)
			require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
			name, _ := field(r.json(t), "metadata", "name").(string)
			assert.Regexp(t, tt.want, name)
		})
	}
	t.Run("namespace label follows the generated name", func(t *testing.T) {
		r := e.do("POST", "/api/v1/namespaces", "application/json", `{"metadata":{"generateName":"lbl-"}}`)
		require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
		m := r.json(t)
		name := field(m, "metadata", "name")
		assert.Equal(t, name, field(m, "metadata", "labels", "kubernetes.io/metadata.name"))
		assert.Equal(t, http.StatusOK, e.do("GET", "/api/v1/namespaces/"+name.(string), "", "").code)
		// An update that drops the label gets it back, as kube-apiserver's strategy keeps it.
		u := e.do("PUT", "/api/v1/namespaces/"+name.(string), "application/json", `{"metadata":{"name":"`+name.(string)+`","labels":{"team":"a"}}}`)
		require.Equal(t, http.StatusOK, u.code, "body: %s", u.body)
		assert.Equal(t, map[string]any{"team": "a", "kubernetes.io/metadata.name": name}, field(u.json(t), "metadata", "labels"))
	})
	runStatusCases(t, e, []statusCase{
		{name: "neither name nor generateName", method: "POST", path: "/api/v1/namespaces", body: `{"metadata":{}}`, code: 422, reason: "Invalid", causes: []string{"metadata.name"}},
		{name: "generateName too long for a namespace", method: "POST", path: "/api/v1/namespaces", body: `{"metadata":{"generateName":"` + strings.Repeat("a", 70) + `"}}`, code: 422, reason: "Invalid", causes: []string{"metadata.generateName"}},
		{name: "invalid generateName", method: "POST", path: appsPath, body: `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"generateName":"Bad_"},"spec":{"replicas":1,"image":"nginx:1.27"}}`, code: 422, reason: "Invalid", causes: []string{"metadata.generateName"}},
	})
}

// TestTypeMetaFromURL: built-in kinds take a missing apiVersion and kind from the URL, as
// kube-apiserver's decoder does; custom resources must carry them (kube-apiserver decodes them
// unstructured); a body naming another type is refused either way.
func TestTypeMetaFromURL(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	leases := "/apis/coordination.k8s.io/v1/namespaces/default/leases"
	tests := []struct {
		name, method, path, ctype, body string
		code                            int
		apiVersion, kind                string
	}{
		{"namespace without both", "POST", "/api/v1/namespaces", "application/json", `{"metadata":{"name":"bare"}}`, 201, "v1", "Namespace"},
		{"namespace with nulls", "POST", "/api/v1/namespaces", "application/json", `{"apiVersion":null,"kind":"","metadata":{"name":"nulls"}}`, 201, "v1", "Namespace"},
		{"lease without apiVersion", "POST", leases, "application/json", `{"kind":"Lease","metadata":{"name":"l1"},"spec":{"holderIdentity":"me"}}`, 201, "coordination.k8s.io/v1", "Lease"},
		{"lease without kind, as YAML", "POST", leases, "application/yaml", "apiVersion: coordination.k8s.io/v1\nmetadata: {name: l2}\n", 201, "coordination.k8s.io/v1", "Lease"},
		{"event without both", "POST", "/api/v1/namespaces/default/events", "application/json", `{"metadata":{"name":"ev1"},"involvedObject":{"kind":"Namespace","name":"default"},"reason":"Test","message":"m","type":"Normal"}`, 201, "v1", "Event"},
		{"crd without both", "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/yaml", strings.SplitN(strings.ReplaceAll(widgetCRD, "WIDGET_EXTRA", ""), "\n", 3)[2], 201, "apiextensions.k8s.io/v1", "CustomResourceDefinition"},
		{"update without both", "PUT", "/api/v1/namespaces/bare", "application/json", `{"metadata":{"name":"bare","labels":{"a":"b"}}}`, 200, "v1", "Namespace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.do(tt.method, tt.path, tt.ctype, tt.body)
			require.Equal(t, tt.code, r.code, "body: %s", r.body)
			m := r.json(t)
			assert.Equal(t, tt.apiVersion, m["apiVersion"])
			assert.Equal(t, tt.kind, m["kind"])
		})
	}
	runStatusCases(t, e, []statusCase{
		{name: "custom resource without kind", method: "POST", path: appsPath, body: `{"apiVersion":"cloudnative.elide.dev/v1","metadata":{"name":"x"},"spec":{"replicas":1,"image":"nginx:1"}}`, code: 400, reason: "BadRequest", message: "Kind"},
		{name: "custom resource without apiVersion", method: "POST", path: appsPath, body: `{"kind":"Application","metadata":{"name":"x"},"spec":{"replicas":1,"image":"nginx:1"}}`, code: 400, reason: "BadRequest"},
		{name: "custom resource without both", method: "POST", path: appsPath, body: `{"metadata":{"name":"x"},"spec":{"replicas":1,"image":"nginx:1"}}`, code: 400, reason: "BadRequest"},
		{name: "lease with the core version", method: "POST", path: leases, body: `{"apiVersion":"v1","metadata":{"name":"x"}}`, code: 400, reason: "BadRequest", message: `Lease in version "v1" cannot be handled as a Lease`},
		{name: "namespace body of another kind", method: "POST", path: "/api/v1/namespaces", body: `{"kind":"Lease","metadata":{"name":"x"}}`, code: 400, reason: "BadRequest", message: "kind"},
	})
}

// TestUnservedResourceIs404: a resource this server does not serve answers kube-apiserver's
// 404 for its path (not an object's NotFound, which would name the resource and an empty name):
// the generic JSON Status under the built-in groups, the plain-text page under any other. The
// resources asked for are ones SPEC §14 does not plan to serve either.
func TestUnservedResourceIs404(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const status = `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","details":{},"code":404}`
	const page = "404 page not found\n"
	for _, tt := range []struct{ method, path, want string }{
		{"GET", "/api/v1/namespaces/default/podtemplates", status},
		{"GET", "/api/v1/podtemplates", status},
		{"GET", "/api/v1/namespaces/default/podtemplates/pt", status},
		{"POST", "/api/v1/namespaces/default/podtemplates", status},
		{"GET", "/api/v1/namespaces/default/resourcequotas?watch=true", status},
		{"GET", "/apis/apps/v2/deployments", status},
		{"GET", "/apis/apps/v1/namespaces/default/deployments/d/nothing", status},
		{"GET", "/api/v1/namespaces/default/configmaps/c/status/more", status},
		{"DELETE", "/apis/example.com/v1/gizmos/g1", page},
		{"GET", "/apis/cloudnative.elide.dev/v2/namespaces/default/applications", page},
		{"GET", "/apis/cloudnative.elide.dev/v1/applications/a", page},
		{"GET", "/no/such/route", page},
	} {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			body := ""
			if tt.method == "POST" {
				body = `{"apiVersion":"v1","kind":"PodTemplate","metadata":{"name":"pt"}}`
			}
			r := e.do(tt.method, tt.path, "application/json", body)
			require.Equal(t, http.StatusNotFound, r.code)
			if tt.want == page {
				assert.Equal(t, page, string(r.body))
				assert.Equal(t, "text/plain; charset=utf-8", r.header.Get("Content-Type"))
				return
			}
			assert.JSONEq(t, tt.want, string(r.body))
		})
	}
}
