package server

import (
	"encoding/json"
	"fmt"
	"slices"

	"github.com/opemu/opemu/kinds"
)

// Custom resources in the OpenAPI documents, as the apiextensions-apiserver's builder writes
// them: the CRD's schema with x-kubernetes-int-or-string unfolded into anyOf (v3), TypeMeta's
// fields and the metadata by reference added at the root and in every embedded resource, and a
// List schema beside it. In v2 a root that preserves unknown fields is a plain object, and the
// schema is made Swagger 2.0-compatible (toOpenAPIV2Schema) without its defaults.

// refPrefix is where a document's named schemas are: "#/components/schemas/" in v3,
// "#/definitions/" in v2.
func refPrefix(v2 bool) string {
	if v2 {
		return "#/definitions/"
	}
	return "#/components/schemas/"
}

// described is a reference to the named schema with a description: "$ref" beside it in v2,
// within allOf in v3 (OpenAPI 3.0 ignores a $ref's siblings).
func described(name, description string, v2 bool) map[string]any {
	ref := map[string]any{"$ref": refPrefix(v2) + name}
	if v2 {
		ref["description"] = description
		return ref
	}
	return map[string]any{"allOf": []any{ref}, "description": description}
}

// customSchema is the schema of a custom resource's objects in a v3 (or, with v2, the v2)
// document, without its group-version-kind.
func customSchema(k *kinds.Kind, v2 bool) map[string]any {
	var s map[string]any
	raw, _ := json.Marshal(k.Schema.OpenAPI())
	_ = json.Unmarshal(raw, &s)
	if v2 {
		if preserve, _ := s["x-kubernetes-preserve-unknown-fields"].(bool); preserve {
			return map[string]any{"type": "object"}
		}
		s = toOpenAPIV2Schema(s)
	} else {
		unfoldIntOrString(s)
	}
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
		s["properties"] = props
	}
	props["metadata"] = described(kinds.ObjectMetaDefinition, kinds.MetadataDescription(false), v2)
	props["apiVersion"] = kinds.TypeMetaProperty("apiVersion")
	props["kind"] = kinds.TypeMetaProperty("kind")
	addEmbeddedResources(s, v2)
	if v2 {
		pruneDefaults(s)
	}
	return s
}

// customListSchema is the schema of a custom resource's list (k.ListKind).
func customListSchema(k *kinds.Kind, v2 bool) map[string]any {
	return map[string]any{
		"type":        "object",
		"description": fmt.Sprintf("%s is a list of %s", k.ListKind, k.Kind),
		"required":    []any{"items"},
		"properties": map[string]any{
			"apiVersion": kinds.TypeMetaProperty("apiVersion"),
			"kind":       kinds.TypeMetaProperty("kind"),
			"items": map[string]any{"type": "array", "items": map[string]any{"$ref": refPrefix(v2) + schemaName(k)},
				"description": fmt.Sprintf("List of %s. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", k.Plural)},
			"metadata": described(kinds.ListMetaDefinition, kinds.MetadataDescription(true), v2),
		},
		"x-kubernetes-group-version-kind": []any{map[string]string{"group": k.Group, "version": k.Version, "kind": k.ListKind}},
	}
}

// eachSchema calls fn with s and every schema nested in its properties, items and
// additionalProperties, parents first.
func eachSchema(s map[string]any, fn func(map[string]any)) {
	fn(s)
	if props, ok := s["properties"].(map[string]any); ok {
		for _, p := range props {
			if p, ok := p.(map[string]any); ok {
				eachSchema(p, fn)
			}
		}
	}
	for _, key := range []string{"items", "additionalProperties"} {
		if sub, ok := s[key].(map[string]any); ok {
			eachSchema(sub, fn)
		}
	}
}

// unfoldIntOrString spells out x-kubernetes-int-or-string as the apiextensions-apiserver
// does (its structural schema's Unfold): anyOf integer or string, or that anyOf first in allOf
// when the schema has an anyOf of its own.
func unfoldIntOrString(s map[string]any) {
	intOrString := func() []any { return []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}} }
	eachSchema(s, func(n map[string]any) {
		if ios, _ := n["x-kubernetes-int-or-string"].(bool); !ios {
			return
		}
		anyOf, has := n["anyOf"].([]any)
		switch {
		case !has:
			n["anyOf"] = intOrString()
		case isIntOrStringAnyOf(anyOf):
		default:
			if all, ok := n["allOf"].([]any); ok && len(all) > 0 {
				if first, ok := all[0].(map[string]any); ok {
					if a, ok := first["anyOf"].([]any); ok && isIntOrStringAnyOf(a) {
						return
					}
				}
			}
			all, _ := n["allOf"].([]any)
			n["allOf"] = append([]any{map[string]any{"anyOf": intOrString()}}, all...)
		}
	})
}

// isIntOrStringAnyOf reports whether anyOf is [{type: integer}, {type: string}].
func isIntOrStringAnyOf(anyOf []any) bool {
	if len(anyOf) != 2 {
		return false
	}
	for i, typ := range []string{"integer", "string"} {
		m, ok := anyOf[i].(map[string]any)
		if !ok || len(m) != 1 || m["type"] != typ {
			return false
		}
	}
	return true
}

// addEmbeddedResources gives every x-kubernetes-embedded-resource apiVersion, kind (both
// required) and metadata, with the apiextensions-apiserver's descriptions; in v2 not to one that
// preserves unknown fields (kubectl would then refuse the unknown ones).
func addEmbeddedResources(s map[string]any, v2 bool) {
	eachSchema(s, func(n map[string]any) {
		if embedded, _ := n["x-kubernetes-embedded-resource"].(bool); !embedded {
			return
		}
		if preserve, _ := n["x-kubernetes-preserve-unknown-fields"].(bool); preserve && v2 {
			return
		}
		props, _ := n["properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
			n["properties"] = props
		}
		props["apiVersion"] = map[string]any{"type": "string", "description": "apiVersion defines the versioned schema of this representation of an object. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources"}
		props["kind"] = map[string]any{"type": "string", "description": "kind is a string value representing the type of this object. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"}
		props["metadata"] = described(kinds.ObjectMetaDefinition, kinds.MetadataDescription(false), v2)
		req, _ := n["required"].([]any)
		for _, f := range []string{"kind", "apiVersion"} {
			if !slices.Contains(req, any(f)) {
				req = append(req, f)
			}
		}
		n["required"] = req
	})
}

// pruneDefaults removes every default, as kube-apiserver does for its v2 document, and returns
// s.
func pruneDefaults(s map[string]any) map[string]any {
	eachSchema(s, func(n map[string]any) { delete(n, "default") })
	return s
}
