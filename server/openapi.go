package server

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/kinds"
)

// OpenAPI v3 (SPEC §4.2): a root listing one document per group-version, each with a get and
// a patch operation per kind (carrying x-kubernetes-group-version-kind and the fieldValidation
// parameter, so kubectl validates on the server) and a component schema per kind (for kubectl
// explain), plus the named schemas it refers to for kinds served from Go types. Each document's
// hash changes with its content, so kubectl's HTTP cache follows CRD changes. The documents are
// built once per generation of the served kinds.

// openAPICache holds the documents of one generation of the kinds registry.
type openAPICache struct {
	mu     sync.Mutex
	gen    uint64
	docs   map[string][]byte // guarded by mu; nil until first built
	hashes map[string]string // guarded by mu; each document's docHash
	v2     []byte            // guarded by mu; the /openapi/v2 document (JSON), nil until built
	v2gen  uint64            // guarded by mu; the generation v2 was built for
}

// openAPIV2JSON returns the /openapi/v2 document, built once per generation of the served
// kinds. The slice is shared: callers must not modify it.
func (s *Server) openAPIV2JSON() []byte {
	c := &s.openapi
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen := s.cfg.Kinds.Generation(); c.v2 == nil || c.v2gen != gen {
		c.v2, c.v2gen = openAPIV2Doc(s.cfg.Kinds.All()), gen
	}
	return c.v2
}

// openAPIDocs returns every group-version document, keyed by "api/v1" or "apis/<g>/<v>", and
// their hashes. The maps are shared: callers must not modify them.
func (s *Server) openAPIDocs() (docs map[string][]byte, hashes map[string]string) {
	c := &s.openapi
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen := s.cfg.Kinds.Generation(); c.docs == nil || c.gen != gen {
		c.docs, c.gen = s.buildOpenAPIDocs(), gen
		c.hashes = make(map[string]string, len(c.docs))
		for p, d := range c.docs {
			c.hashes[p] = docHash(d)
		}
	}
	return c.docs, c.hashes
}

func (s *Server) buildOpenAPIDocs() map[string][]byte {
	byGV := map[string][]*kinds.Kind{}
	for _, k := range s.cfg.Kinds.All() {
		p := "api/" + k.Version
		if k.Group != "" {
			p = "apis/" + k.Group + "/" + k.Version
		}
		byGV[p] = append(byGV[p], k)
	}
	out := make(map[string][]byte, len(byGV)+len(discoveryDocs))
	for p, kinds := range byGV {
		out[p] = openAPIDoc(kinds)
	}
	for p, d := range discoveryDocs {
		out[p] = discoveryOpenAPIDoc(d)
	}
	return out
}

// discoveryOpenAPI describes one discovery path in the OpenAPI v3 index, as kube-apiserver's
// documents do.
type discoveryOpenAPI struct {
	path, tag, operationID string
	typ                    reflect.Type
}

// discoveryDocs are the documents of the discovery paths, by their name in the index.
var discoveryDocs = map[string]discoveryOpenAPI{
	"version": {"/version/", "version", "getCodeVersion", kinds.DiscoveryTypes.Version},
	"api":     {"/api/", "core", "getCoreAPIVersions", kinds.DiscoveryTypes.APIVersions},
	"apis":    {"/apis/", "apis", "getAPIVersions", kinds.DiscoveryTypes.APIGroupList},
}

func discoveryOpenAPIDoc(d discoveryOpenAPI) []byte {
	ref := map[string]any{"schema": map[string]any{"$ref": "#/components/schemas/" + kinds.DefinitionName(d.typ)}}
	content := map[string]any{"application/json": ref}
	description := "get available API versions"
	if d.path == "/version/" {
		description = "get the version information for this server"
	} else {
		content["application/yaml"], content["application/vnd.kubernetes.protobuf"] = ref, ref
	}
	b, _ := json.Marshal(map[string]any{
		"openapi": "3.0.0",
		"info":    openAPIInfo(),
		"paths": map[string]any{d.path: map[string]any{"get": map[string]any{
			"tags": []any{d.tag}, "description": description, "operationId": d.operationID,
			"responses": map[string]any{"200": map[string]any{"description": "OK", "content": content}, "401": map[string]any{"description": "Unauthorized"}},
		}}},
		"components": map[string]any{"schemas": kinds.Definitions(d.typ)},
	})
	return b
}

func openAPIDoc(served []*kinds.Kind) []byte {
	paths := map[string]any{}
	schemas := map[string]any{}
	for _, k := range served {
		gvk := map[string]string{"group": k.Group, "version": k.Version, "kind": k.Kind}
		name, defs := kindDefinitions(k)
		ref := map[string]any{"$ref": "#/components/schemas/" + name}
		okResp := map[string]any{"200": map[string]any{"description": "OK", "content": map[string]any{"application/json": map[string]any{"schema": ref}}}}
		patchTypes := map[string]any{
			"application/merge-patch+json": map[string]any{"schema": map[string]any{"type": "object"}},
			"application/json-patch+json":  map[string]any{"schema": map[string]any{"type": "object"}},
			"application/apply-patch+yaml": map[string]any{"schema": map[string]any{"type": "object"}},
		}
		if k.StrategicPatch != nil {
			patchTypes["application/strategic-merge-patch+json"] = map[string]any{"schema": map[string]any{"type": "object"}}
		}
		query := func(n string) map[string]any {
			return map[string]any{"name": n, "in": "query", "schema": map[string]any{"type": "string", "uniqueItems": true}}
		}
		base := "/api/" + k.Version
		if k.Group != "" {
			base = "/apis/" + k.Group + "/" + k.Version
		}
		params := []any{map[string]any{"name": "name", "in": "path", "required": true, "schema": map[string]any{"type": "string", "uniqueItems": true}}}
		if k.Namespaced {
			base += "/namespaces/{namespace}"
			params = append(params, map[string]any{"name": "namespace", "in": "path", "required": true, "schema": map[string]any{"type": "string", "uniqueItems": true}})
		}
		op := strings.ToUpper(k.Kind[:1]) + k.Kind[1:]
		paths[base+"/"+k.Plural+"/{name}"] = map[string]any{
			"parameters": params,
			"get":        map[string]any{"operationId": "read" + op, "x-kubernetes-action": "get", "x-kubernetes-group-version-kind": gvk, "responses": okResp},
			"put": map[string]any{"operationId": "replace" + op, "x-kubernetes-action": "put", "x-kubernetes-group-version-kind": gvk,
				"parameters": []any{query("dryRun"), query("fieldManager"), query("fieldValidation")}, "responses": okResp},
			"patch": map[string]any{"operationId": "patch" + op, "x-kubernetes-action": "patch", "x-kubernetes-group-version-kind": gvk,
				"parameters":  []any{query("dryRun"), query("fieldManager"), query("fieldValidation"), query("force")},
				"requestBody": map[string]any{"required": true, "content": patchTypes}, "responses": okResp},
		}
		paths[base+"/"+k.Plural] = map[string]any{
			"post": map[string]any{"operationId": "create" + op, "x-kubernetes-action": "post", "x-kubernetes-group-version-kind": gvk,
				"parameters": []any{query("dryRun"), query("fieldManager"), query("fieldValidation")}, "responses": okResp},
		}
		for n, raw := range defs {
			if _, taken := schemas[n]; !taken && n != name {
				schemas[n] = raw
			}
		}
		schemas[name] = kindSchema(k)
		if isCustom(k) {
			schemas[schemaName(k)+"List"] = customListSchema(k, false)
			for n, raw := range kinds.MetaDefinitions() {
				schemas[n] = raw
			}
		}
	}
	doc := map[string]any{
		"openapi":    "3.0.0",
		"info":       openAPIInfo(),
		"paths":      paths,
		"components": map[string]any{"schemas": schemas},
	}
	b, _ := json.Marshal(doc)
	return b
}

// kindSchema is k's schema as both OpenAPI documents show it, carrying its group-version-kind
// (a fresh map each call: callers may change it).
// kindDefinitions returns the name of k's schema and, for kinds served from Go types
// (kinds.Definer), the named schemas it refers to (its own included).
func kindDefinitions(k *kinds.Kind) (string, map[string]json.RawMessage) {
	if d, ok := k.Schema.(kinds.Definer); ok {
		return d.Definitions()
	}
	return schemaName(k), nil
}

// isCustom reports whether k is a custom resource with a schema of its CRD, which the documents
// show as kube-apiserver shows custom resources (openapicr.go).
func isCustom(k *kinds.Kind) bool {
	if _, ok := k.Schema.(kinds.Definer); ok {
		return false
	}
	return !k.BuiltIn() && k.Schema != nil
}

// openAPIInfo is the info of every document: kube-apiserver's title and minor version.
func openAPIInfo() map[string]any {
	v := kubeVersion()
	return map[string]any{"title": "Kubernetes", "version": v.Major + "." + v.Minor}
}

// kindSchema is the schema of k's objects in the v3 documents, marked with its group, version
// and kind.
func kindSchema(k *kinds.Kind) map[string]any {
	var schema map[string]any
	if name, defs := kindDefinitions(k); defs != nil {
		_ = json.Unmarshal(defs[name], &schema)
	} else if isCustom(k) {
		schema = customSchema(k, false)
	} else if k.Schema != nil {
		raw, _ := json.Marshal(k.Schema.OpenAPI())
		_ = json.Unmarshal(raw, &schema)
	} else {
		schema = map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true,
			"properties": map[string]any{"apiVersion": map[string]any{"type": "string"}, "kind": map[string]any{"type": "string"}, "metadata": map[string]any{"type": "object"}}}
	}
	return withGVK(schema, k)
}

// withGVK marks schema with k's group, version and kind, and returns it.
func withGVK(schema map[string]any, k *kinds.Kind) map[string]any {
	schema["x-kubernetes-group-version-kind"] = []any{map[string]string{"group": k.Group, "version": k.Version, "kind": k.Kind}}
	return schema
}

// schemaName reverses the group like Kubernetes does: dev.elide.cloudnative.v1.Application.
func schemaName(k *kinds.Kind) string {
	parts := strings.Split(k.Group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	g := strings.Join(parts, ".")
	if g == "" {
		g = "io.k8s.api.core"
	}
	return g + "." + k.Version + "." + k.Kind
}

func docHash(b []byte) string {
	h := sha256.Sum256(b)
	return strings.ToUpper(hex.EncodeToString(h[:8]))
}

func (s *Server) openAPIRoot(c *echo.Context) error {
	docs, hashes := s.openAPIDocs()
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	paths := map[string]any{}
	for _, k := range keys {
		paths[k] = map[string]string{"serverRelativeURL": "/openapi/v3/" + k + "?hash=" + hashes[k]}
	}
	// kube-apiserver writes the index without a Content-Type, which Go's server then sniffs.
	b, _ := json.Marshal(map[string]any{"paths": paths})
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", b)
}

func (s *Server) openAPIDocument(c *echo.Context) error {
	p := strings.TrimPrefix(c.Request().URL.Path, "/openapi/v3/")
	docs, _ := s.openAPIDocs()
	doc, ok := docs[p]
	if !ok {
		// As kube-apiserver: a bare 404, no body.
		return c.NoContent(http.StatusNotFound)
	}
	return c.Blob(http.StatusOK, "application/json", doc)
}
