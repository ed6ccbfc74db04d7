package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// refs collects every $ref in a decoded JSON document.
func refs(v any, out map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if r, ok := e.(string); ok && k == "$ref" {
				out[r] = true
			}
			refs(e, out)
		}
	case []any:
		for _, e := range v {
			refs(e, out)
		}
	}
}

// TestOpenAPITypedKinds: the kinds served from Go types are documented with named schemas in
// both OpenAPI versions, and every reference resolves within its document.
func TestOpenAPITypedKinds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	root := e.do("GET", "/openapi/v3", "", "").json(t)
	paths := root["paths"].(map[string]any)
	for _, gv := range []string{"api/v1", "apis/apps/v1", "apis/batch/v1", "apis/events.k8s.io/v1", "apis/rbac.authorization.k8s.io/v1"} {
		url := paths[gv].(map[string]any)["serverRelativeURL"].(string)
		doc := e.do("GET", url, "", "").json(t)
		schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
		found := map[string]bool{}
		refs(doc, found)
		require.NotEmpty(t, found, gv)
		for r := range found {
			name, ok := strings.CutPrefix(r, "#/components/schemas/")
			require.True(t, ok, r)
			assert.Contains(t, schemas, name, "%s: %s resolves", gv, r)
		}
	}
	doc := e.do("GET", paths["apis/apps/v1"].(map[string]any)["serverRelativeURL"].(string), "", "").json(t)
	deploy := doc["components"].(map[string]any)["schemas"].(map[string]any)["io.k8s.api.apps.v1.Deployment"].(map[string]any)
	assert.Equal(t, []any{map[string]any{"group": "apps", "version": "v1", "kind": "Deployment"}}, deploy["x-kubernetes-group-version-kind"])

	var v2 map[string]any
	require.NoError(t, json.Unmarshal(e.do("GET", "/openapi/v2", "", "").body, &v2))
	defs := v2["definitions"].(map[string]any)
	found := map[string]bool{}
	refs(v2, found)
	for r := range found {
		name, ok := strings.CutPrefix(r, "#/definitions/")
		require.True(t, ok, r)
		assert.Contains(t, defs, name, "%s resolves", r)
	}
	strategy := defs["io.k8s.api.apps.v1.DeploymentSpec"].(map[string]any)["properties"].(map[string]any)["strategy"].(map[string]any)
	assert.Equal(t, "#/definitions/io.k8s.api.apps.v1.DeploymentStrategy", strategy["$ref"])
	assert.NotContains(t, strategy, "allOf")
	assert.Equal(t, "string", defs["io.k8s.apimachinery.pkg.util.intstr.IntOrString"].(map[string]any)["type"])
}
