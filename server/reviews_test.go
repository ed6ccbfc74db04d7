package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestReviews: the access, rules and self reviews are answered (201, never stored): everything
// is allowed, and the user of a request without credentials is system:anonymous.
func TestReviews(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	const (
		ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
		ssrr = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
		ssr  = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
	)
	r := e.do("POST", ssar, "application/json", `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview",
		"spec":{"resourceAttributes":{"namespace":"default","verb":"create","group":"cloudnative.elide.dev","resource":"applications"}}}`)
	require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
	m := r.json(t)
	assert.Equal(t, "SelfSubjectAccessReview", m["kind"])
	assert.Equal(t, true, field(m, "status", "allowed"))
	assert.NotEmpty(t, field(m, "status", "reason"))
	assert.Equal(t, "applications", field(m, "spec", "resourceAttributes", "resource"), "the spec is echoed")

	r = e.do("POST", ssar, "application/yaml", "spec: {nonResourceAttributes: {path: /healthz, verb: get}}\n")
	require.Equal(t, http.StatusCreated, r.code, "apiVersion and kind come from the URL: %s", r.body)
	assert.Equal(t, true, field(r.json(t), "status", "allowed"))

	r = e.do("POST", ssrr, "application/json", `{"spec":{"namespace":"default"}}`)
	require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
	m = r.json(t)
	assert.Equal(t, []any{map[string]any{"verbs": []any{"*"}, "apiGroups": []any{"*"}, "resources": []any{"*"}}}, field(m, "status", "resourceRules"))
	assert.Equal(t, []any{map[string]any{"verbs": []any{"*"}, "nonResourceURLs": []any{"*"}}}, field(m, "status", "nonResourceRules"))
	assert.Equal(t, false, field(m, "status", "incomplete"))
	assert.Equal(t, map[string]any{}, m["spec"], "as kube-apiserver: a new review, its status only")

	r = e.do("POST", ssr, "application/json", `{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	require.Equal(t, http.StatusCreated, r.code, "body: %s", r.body)
	m = r.json(t)
	assert.Equal(t, "system:anonymous", field(m, "status", "userInfo", "username"))
	assert.Equal(t, []any{"system:unauthenticated"}, field(m, "status", "userInfo", "groups"))
	assert.NotEmpty(t, field(m, "metadata", "creationTimestamp"), "made now, as kube-apiserver's")

	// Discovery lists them, create only.
	for gv, name := range map[string]string{"authorization.k8s.io/v1": "selfsubjectaccessreviews", "authentication.k8s.io/v1": "selfsubjectreviews"} {
		rl := e.do("GET", "/apis/"+gv, "", "")
		require.Equal(t, http.StatusOK, rl.code)
		found := false
		for _, res := range rl.json(t)["resources"].([]any) {
			if res := res.(map[string]any); res["name"] == name {
				found = true
				assert.Equal(t, []any{"create"}, res["verbs"])
				assert.Equal(t, false, res["namespaced"])
			}
		}
		assert.True(t, found, "%s lists %s", gv, name)
	}
	assert.Equal(t, http.StatusOK, e.do("GET", "/apis/authorization.k8s.io", "", "").code)

	runStatusCases(t, e, []statusCase{
		{name: "neither attributes", method: "POST", path: ssar, body: `{"spec":{}}`, code: 422, reason: "Invalid", causes: []string{"spec"}, message: "exactly one of nonResourceAttributes or resourceAttributes must be specified"},
		{name: "both attributes", method: "POST", path: ssar, body: `{"spec":{"resourceAttributes":{"verb":"get"},"nonResourceAttributes":{"verb":"get","path":"/"}}}`, code: 422, reason: "Invalid"},
		{name: "rules review without a namespace", method: "POST", path: ssrr, body: `{"spec":{}}`, code: 400, reason: "BadRequest", message: "no namespace on request"},
		{name: "another kind", method: "POST", path: ssr, body: `{"apiVersion":"authentication.k8s.io/v1","kind":"TokenReview"}`, code: 400, reason: "BadRequest"},
		{name: "not JSON", method: "POST", path: ssr, body: `{`, code: 400, reason: "BadRequest"},
		{name: "get is not a verb of reviews", method: "GET", path: ssar, code: 405, reason: "MethodNotAllowed"},
		{name: "delete is not a verb of reviews", method: "DELETE", path: ssr, code: 405, reason: "MethodNotAllowed"},
	})
}
