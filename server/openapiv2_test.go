package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
)

// gizmoCRD's schema uses what Swagger 2.0 lacks: nullable, int-or-string (anyOf),
// x-kubernetes-preserve-unknown-fields, oneOf.
const gizmoCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gizmos.example.com}
spec:
  group: example.com
  scope: Cluster
  names: {kind: Gizmo, plural: gizmos}
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
            required: [port, note]
            properties:
              port:
                x-kubernetes-int-or-string: true
                anyOf: [{type: integer}, {type: string}]
              note: {type: string, nullable: true}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {a: {type: string}}}
              mode: {type: string, oneOf: [{enum: [a]}, {enum: [b]}]}
`

// TestOpenAPIV2: /openapi/v2 is the Swagger 2.0 form of the same schemas as v3, as JSON or as
// the protobuf kubectl asks for, and follows CRDs.
func TestOpenAPIV2(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", "application/yaml", gizmoCRD).code)

	r := e.doAccept("GET", "/openapi/v2", "application/json")
	require.Equal(t, http.StatusOK, r.code)
	assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	doc := r.json(t)
	assert.Equal(t, "2.0", doc["swagger"])
	app := field(doc, "definitions", "dev.elide.cloudnative.v1.Application").(map[string]any)
	assert.Equal(t, []any{map[string]any{"group": "cloudnative.elide.dev", "version": "v1", "kind": "Application"}}, app["x-kubernetes-group-version-kind"])
	assert.Equal(t, "Number of replicas to run (0 to 100; use an HPA for more).", field(app, "properties", "spec", "properties", "replicas", "description"))
	assert.Equal(t, []any{"replicas", "image"}, field(app, "properties", "spec", "required"))
	get := field(doc, "paths", "/apis/cloudnative.elide.dev/v1/namespaces/{namespace}/applications/{name}", "get").(map[string]any)
	assert.Equal(t, map[string]any{"group": "cloudnative.elide.dev", "version": "v1", "kind": "Application"}, get["x-kubernetes-group-version-kind"])
	assert.Contains(t, doc["paths"], "/api/v1/namespaces/{name}")

	// What Swagger 2.0 lacks is dropped the way kube-apiserver does it for CRDs.
	spec := field(doc, "definitions", "com.example.v1.Gizmo", "properties", "spec").(map[string]any)
	assert.Equal(t, map[string]any{"x-kubernetes-int-or-string": true}, field(spec, "properties", "port"))
	assert.Equal(t, map[string]any{}, field(spec, "properties", "note"), "nullable: no type")
	assert.Equal(t, map[string]any{"x-kubernetes-preserve-unknown-fields": true}, field(spec, "properties", "extra"))
	assert.Equal(t, map[string]any{"type": "string"}, field(spec, "properties", "mode"))
	assert.Equal(t, []any{"port"}, spec["required"], "a nullable field is not required")

	for _, accept := range []string{
		"application/com.github.proto-openapi.spec.v2@v1.0+protobuf", // what kubectl sends
		"application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
	} {
		r := e.doAccept("GET", "/openapi/v2", accept)
		require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
		assert.Equal(t, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", r.header.Get("Content-Type"))
		var pb openapi_v2.Document
		require.NoError(t, proto.Unmarshal(r.body, &pb))
		assert.Equal(t, "2.0", pb.GetSwagger())
		names := map[string]bool{}
		for _, d := range pb.GetDefinitions().GetAdditionalProperties() {
			names[d.GetName()] = true
		}
		assert.True(t, names["dev.elide.cloudnative.v1.Application"])
		assert.True(t, names["com.example.v1.Gizmo"])
	}

	// Unchanged documents are not sent again; unknown formats are refused.
	etag := r.header.Get("Etag")
	require.NotEmpty(t, etag)
	req, err := http.NewRequest("GET", e.http.URL+"/openapi/v2", nil)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", etag)
	resp, err := e.http.Client().Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	na := status(t, e.doAccept("GET", "/openapi/v2", "text/html"), http.StatusNotAcceptable, "NotAcceptable")
	assert.Contains(t, na["message"], "application/json")

	// A CRD deleted is gone from the document.
	require.Equal(t, http.StatusOK, e.do("DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gizmos.example.com", "", "").code)
	assert.False(t, strings.Contains(string(e.doAccept("GET", "/openapi/v2", "application/json").body), "Gizmo"))
}
