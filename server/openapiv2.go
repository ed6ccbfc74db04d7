package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"time"

	openapi_v2 "github.com/google/gnostic-models/openapiv2"
	"github.com/labstack/echo/v5"
	"github.com/munnerz/goautoneg"
	"github.com/opemu/opemu/kinds"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// OpenAPI v2 (`/openapi/v2`): one Swagger 2.0 document for every served kind, built from the
// same schemas as the v3 documents, for the clients that still read v2: `kubectl explain
// --output=plaintext-openapiv2`, kubectl's client-side validation, Helm. kubectl asks for it as
// protobuf only (Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf) and
// decodes whatever comes back as protobuf, so the answer is negotiated as kube-apiserver's
// OpenAPI handler does: protobuf or JSON, by the Accept header, 406 for anything else.

// Media types of the v2 document. The protobuf one has a deprecated spelling clients still send.
const (
	openAPIV2Protobuf           = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
	openAPIV2ProtobufDeprecated = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
)

// openAPIV2Cache keeps the protobuf encoding of the last JSON document, so the conversion runs
// once per change of the served kinds rather than once per request.
type openAPIV2Cache struct {
	mu sync.Mutex // guards the fields below
	js []byte
	pb []byte
}

func (c *openAPIV2Cache) protobuf(js []byte) ([]byte, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pb != nil && bytes.Equal(c.js, js) {
		return c.pb, nil
	}
	doc, err := openapi_v2.ParseDocument(js)
	if err != nil {
		return nil, err
	}
	pb, err := proto.Marshal(doc)
	if err != nil {
		return nil, err
	}
	c.js, c.pb = js, pb
	return pb, nil
}

// openAPIV2 serves GET /openapi/v2.
func (s *Server) openAPIV2(c *echo.Context) error {
	js := s.openAPIV2JSON()
	accept := c.Request().Header.Get("Accept")
	if accept == "" {
		accept = "*/*"
	}
	var body []byte
	var contentType string
	for _, clause := range goautoneg.ParseAccept(accept) {
		mt := clause.Type + "/" + clause.SubType
		switch {
		case mt == "application/json" || clause.Type == "*" || mt == "application/*":
			body, contentType = js, "application/json"
		case mt == openAPIV2Protobuf || mt == openAPIV2ProtobufDeprecated:
			pb, err := s.openAPIV2Cache.protobuf(js)
			if err != nil {
				return err
			}
			body, contentType = pb, openAPIV2Protobuf
		default:
			continue
		}
		break
	}
	if body == nil {
		return apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "", schema.GroupResource{}, "",
			"only application/json and "+openAPIV2Protobuf+" are served", 0, false)
	}
	w := c.Response()
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Etag", `"`+docHash(body)+`"`)
	http.ServeContent(w, c.Request(), "", time.Time{}, bytes.NewReader(body))
	return nil
}

// openAPIV2Doc builds the Swagger 2.0 document of kinds: for each, a definition (its v3 schema
// made v2-compatible as kube-apiserver does for CRDs) and get, put, patch and create
// operations carrying x-kubernetes-group-version-kind.
func openAPIV2Doc(served []*kinds.Kind) []byte {
	paths := map[string]any{}
	defs := map[string]any{}
	str := func(name, in string) map[string]any {
		p := map[string]any{"name": name, "in": in, "type": "string", "uniqueItems": true}
		if in == "path" {
			p["required"] = true
		}
		return p
	}
	// addDefinition adds a named schema of the v3 documents, made v2-compatible.
	addDefinition := func(n string, raw json.RawMessage) {
		if _, taken := defs[n]; !taken {
			var m map[string]any
			_ = json.Unmarshal(raw, &m)
			defs[n] = pruneDefaults(toOpenAPIV2Schema(refsToV2(m)))
		}
	}
	for _, k := range served {
		name, typed := kindDefinitions(k)
		for n, raw := range typed {
			if n != name {
				addDefinition(n, raw)
			}
		}
		if isCustom(k) {
			defs[name] = withGVK(customSchema(k, true), k)
			defs[schemaName(k)+"List"] = customListSchema(k, true)
			for n, raw := range kinds.MetaDefinitions() {
				addDefinition(n, raw)
			}
		} else {
			defs[name] = pruneDefaults(toOpenAPIV2Schema(refsToV2(kindSchema(k))))
		}
		ref := map[string]any{"$ref": "#/definitions/" + name}
		gvk := map[string]string{"group": k.Group, "version": k.Version, "kind": k.Kind}
		ok := map[string]any{"200": map[string]any{"description": "OK", "schema": ref}}
		created := map[string]any{"200": map[string]any{"description": "OK", "schema": ref}, "201": map[string]any{"description": "Created", "schema": ref}}
		body := map[string]any{"name": "body", "in": "body", "required": true, "schema": ref}
		patchBody := map[string]any{"name": "body", "in": "body", "required": true, "schema": map[string]any{"type": "object"}}
		patchTypes := []any{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}
		if k.StrategicPatch != nil {
			patchTypes = append(patchTypes, "application/strategic-merge-patch+json")
		}
		base := "/api/" + k.Version
		if k.Group != "" {
			base = "/apis/" + k.Group + "/" + k.Version
		}
		params := []any{str("name", "path")}
		scope := ""
		if k.Namespaced {
			base += "/namespaces/{namespace}"
			params = append(params, str("namespace", "path"))
			scope = "Namespaced"
		}
		op := func(verb string) string { return verb + operationGroup(k) + scope + k.Kind }
		operation := func(verb, action string, responses map[string]any, parameters ...any) map[string]any {
			o := map[string]any{"operationId": op(verb), "x-kubernetes-action": action, "x-kubernetes-group-version-kind": gvk,
				"consumes": []any{"*/*"}, "produces": []any{"application/json", "application/yaml"}, "responses": responses}
			if len(parameters) > 0 {
				o["parameters"] = parameters
			}
			return o
		}
		paths[base+"/"+k.Plural+"/{name}"] = map[string]any{
			"parameters": params,
			"get":        operation("read", "get", ok),
			"put":        operation("replace", "put", created, body, str("dryRun", "query"), str("fieldManager", "query"), str("fieldValidation", "query")),
			"patch": func() map[string]any {
				o := operation("patch", "patch", created, patchBody, str("dryRun", "query"), str("fieldManager", "query"), str("fieldValidation", "query"), str("force", "query"))
				o["consumes"] = patchTypes
				return o
			}(),
		}
		collection := map[string]any{"post": operation("create", "post", created, body, str("dryRun", "query"), str("fieldManager", "query"), str("fieldValidation", "query"))}
		if k.Namespaced {
			collection["parameters"] = []any{str("namespace", "path")}
		}
		paths[base+"/"+k.Plural] = collection
	}
	b, _ := json.Marshal(map[string]any{
		"swagger":     "2.0",
		"info":        openAPIInfo(),
		"paths":       paths,
		"definitions": defs,
	})
	return b
}

// operationGroup names k's group and version in operation ids as Kubernetes does
// (coordination.k8s.io/v1: CoordinationV1; the core group: CoreV1), so ids are unique across
// groups.
func operationGroup(k *kinds.Kind) string {
	g := "core"
	if k.Group != "" {
		g = strings.TrimSuffix(k.Group, ".k8s.io")
	}
	var b strings.Builder
	for _, part := range strings.FieldsFunc(g+"."+k.Version, func(r rune) bool { return r == '.' || r == '-' }) {
		b.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return b.String()
}

// openAPIV2SchemaFields are the fields a Swagger 2.0 schema may have (besides x- extensions).
var openAPIV2SchemaFields = map[string]bool{
	"$ref": true, "format": true, "title": true, "description": true, "default": true, "multipleOf": true,
	"maximum": true, "exclusiveMaximum": true, "minimum": true, "exclusiveMinimum": true, "maxLength": true,
	"minLength": true, "pattern": true, "maxItems": true, "minItems": true, "uniqueItems": true,
	"maxProperties": true, "minProperties": true, "required": true, "enum": true, "additionalProperties": true,
	"type": true, "items": true, "properties": true, "readOnly": true, "example": true,
}

// toOpenAPIV2Schema makes an OpenAPI v3 structural schema Swagger 2.0-compatible, with the rules
// kube-apiserver applies to CRD schemas for /openapi/v2: no allOf, oneOf, anyOf or not; a
// nullable field loses its type, items and properties (and is no longer required); a field that
// preserves unknown fields loses its items and properties, and an object one its type; an array
// left without items loses its type. Fields Swagger 2.0 does not have are dropped. It modifies s.
func toOpenAPIV2Schema(s map[string]any) map[string]any {
	nullable, _ := s["nullable"].(bool)
	for k := range s {
		if !openAPIV2SchemaFields[k] && !strings.HasPrefix(k, "x-") {
			delete(s, k)
		}
	}
	if nullable {
		delete(s, "type")
		delete(s, "items")
		delete(s, "properties")
	}
	if preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool); preserve {
		delete(s, "items")
		delete(s, "properties")
		if s["type"] == "object" {
			delete(s, "type")
		}
	}
	if _, ok := s["items"]; !ok && s["type"] == "array" {
		delete(s, "type")
	}
	if props, ok := s["properties"].(map[string]any); ok {
		var nullables []string
		for name, p := range props {
			if p, ok := p.(map[string]any); ok {
				if n, _ := p["nullable"].(bool); n {
					nullables = append(nullables, name)
				}
				props[name] = toOpenAPIV2Schema(p)
			}
		}
		if r, ok := s["required"]; ok {
			s["required"] = without(r, nullables...)
		}
	}
	if items, ok := s["items"].(map[string]any); ok {
		s["items"] = toOpenAPIV2Schema(items)
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		if n, _ := ap["nullable"].(bool); n {
			delete(s, "required")
		}
		s["additionalProperties"] = toOpenAPIV2Schema(ap)
	}
	if r, ok := s["required"].([]any); ok && len(r) == 0 {
		delete(s, "required")
	}
	return s
}

// refsToV2 rewrites the named-type references of a schema served from Go types (kinds.Definer)
// the way kube-apiserver's v2 document writes them: a field's allOf of one $ref becomes the $ref
// itself, pointing into #/definitions, and the one-of-two types (IntOrString, Quantity) become
// strings. It modifies s.
func refsToV2(s map[string]any) map[string]any {
	if all, ok := s["allOf"].([]any); ok && len(all) == 1 {
		if r, ok := all[0].(map[string]any); ok && r["$ref"] != nil {
			s["$ref"] = r["$ref"]
			delete(s, "allOf")
			delete(s, "default")
		}
	}
	if r, ok := s["$ref"].(string); ok {
		s["$ref"] = strings.Replace(r, "#/components/schemas/", "#/definitions/", 1)
	}
	if _, ok := s["oneOf"]; ok {
		delete(s, "oneOf")
		s["type"] = "string"
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			if p, ok := p.(map[string]any); ok {
				refsToV2(p)
			}
		}
	}
	for _, k := range []string{"items", "additionalProperties"} {
		if sub, ok := s[k].(map[string]any); ok {
			refsToV2(sub)
		}
	}
	return s
}

// without returns the list l (a []any of strings, or nil) less names.
func without(l any, names ...string) any {
	list, ok := l.([]any)
	if !ok || len(names) == 0 {
		return l
	}
	out := []any{}
	for _, v := range list {
		keep := true
		for _, n := range names {
			keep = keep && v != n
		}
		if keep {
			out = append(out, v)
		}
	}
	return out
}
