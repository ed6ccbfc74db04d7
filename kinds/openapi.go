package kinds

import (
	"encoding/json"
	"maps"
	"reflect"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
)

// OpenAPI v3 schemas of Go API types, in the shape kube-apiserver serves them: one named
// definition per struct (and per special type: Quantity, IntOrString, Time, ...), fields
// referring to them with allOf/$ref, descriptions from the types' SwaggerDoc, required fields,
// strategic merge patch tags as x-kubernetes-patch-strategy/-merge-key, and list and map types
// from the structured-merge-diff schema.

// openAPICache keeps the encoded definitions of one typeSet, each built once. Safe for
// concurrent use.
type openAPICache struct {
	mu   sync.Mutex
	defs map[string]json.RawMessage // guarded by mu
}

// definitions returns root's definition and those of every named type it reaches.
func (c *openAPICache) definitions(ts *typeSet, root *goType) map[string]json.RawMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.defs == nil {
		c.defs = map[string]json.RawMessage{}
	}
	out := map[string]json.RawMessage{}
	var visit func(g *goType)
	visit = func(g *goType) {
		switch {
		case g.name != "":
			if _, done := out[g.name]; done {
				return
			}
			raw, ok := c.defs[g.name]
			if !ok {
				raw, _ = json.Marshal(definition(ts, g))
				c.defs[g.name] = raw
			}
			out[g.name] = raw
		case g.elem != nil:
			visit(g.elem)
			return
		}
		for _, n := range g.order {
			visit(g.fields[n].typ)
		}
	}
	visit(root)
	return out
}

func ref(name string) map[string]any { return map[string]any{"$ref": "#/components/schemas/" + name} }

// definition is the schema of a named type.
func definition(ts *typeSet, g *goType) map[string]any {
	s := map[string]any{}
	if doc := ts.docs.of(g.name)[""]; doc != "" {
		s["description"] = doc
	}
	switch g.kind {
	case kindObject:
		s["type"] = "object"
		props := map[string]any{}
		var required []string
		for _, n := range g.order {
			f := g.fields[n]
			props[n] = property(ts, g, f)
			if f.required {
				required = append(required, n)
			}
		}
		if len(props) > 0 {
			s["properties"] = props
		}
		if len(required) > 0 {
			s["required"] = required
		}
		if a, ok := ts.smd.named(g.name); ok && a.Map != nil && a.Map.ElementRelationship == smdschema.Atomic {
			s["x-kubernetes-map-type"] = "atomic"
		}
	case kindTime:
		s["type"], s["format"] = "string", "date-time"
	case kindDuration:
		s["type"] = "string"
	case kindQuantity:
		s["oneOf"] = []any{map[string]any{"type": "string"}, map[string]any{"type": "number"}}
	case kindIntOrString:
		s["format"] = "int-or-string"
		s["oneOf"] = []any{map[string]any{"type": "integer"}, map[string]any{"type": "string"}}
	case kindAny:
		s["type"] = "object"
	default:
		for k, v := range inline(g) {
			s[k] = v
		}
	}
	return s
}

// property is the schema of field f of the object type owner.
func property(ts *typeSet, owner *goType, f *goField) map[string]any {
	var s map[string]any
	if f.typ.name != "" {
		s = map[string]any{"allOf": []any{ref(f.typ.name)}}
		if f.typ.kind == kindObject && !f.pointer {
			s["default"] = map[string]any{}
		}
	} else {
		s = inline(f.typ)
	}
	if doc := ts.docs.of(f.docOf)[f.name]; doc != "" {
		s["description"] = doc
	}
	if f.patchStrategy != "" {
		s["x-kubernetes-patch-strategy"] = f.patchStrategy
	}
	if f.patchMergeKey != "" {
		s["x-kubernetes-patch-merge-key"] = f.patchMergeKey
	}
	if a, ok := ts.smd.field(owner.name, f.name); ok {
		switch {
		case a.List != nil && a.List.ElementRelationship == smdschema.Associative && len(a.List.Keys) > 0:
			s["x-kubernetes-list-type"] = "map"
			s["x-kubernetes-list-map-keys"] = a.List.Keys
		case a.List != nil && a.List.ElementRelationship == smdschema.Associative:
			s["x-kubernetes-list-type"] = "set"
		case a.Map != nil && f.typ.kind == kindMap && a.Map.ElementRelationship == smdschema.Atomic:
			s["x-kubernetes-map-type"] = "atomic"
		}
	}
	return s
}

// inline is the schema of an unnamed type (a scalar, an array, a map), or a reference.
func inline(g *goType) map[string]any {
	if g.name != "" && g.kind != kindString && g.kind != kindInteger && g.kind != kindNumber && g.kind != kindBoolean {
		return ref(g.name)
	}
	s := map[string]any{}
	switch g.kind {
	case kindArray:
		s["type"], s["items"] = "array", element(g.elem)
	case kindMap:
		s["type"], s["additionalProperties"] = "object", element(g.elem)
	case kindString:
		s["type"] = "string"
	case kindInteger:
		s["type"] = "integer"
	case kindNumber:
		s["type"] = "number"
	case kindBoolean:
		s["type"] = "boolean"
	default:
		s["type"] = "object"
	}
	if g.format != "" {
		s["format"] = g.format
	}
	return s
}

// element is the schema of an array's items or a map's values.
func element(g *goType) map[string]any {
	if g.name != "" && g.kind != kindString && g.kind != kindInteger && g.kind != kindNumber && g.kind != kindBoolean {
		s := map[string]any{"allOf": []any{ref(g.name)}}
		if g.kind == kindObject {
			s["default"] = map[string]any{}
		}
		return s
	}
	return inline(g)
}

// The schemas kube-apiserver adds to a custom resource's in its OpenAPI documents: TypeMeta's
// fields, and the metadata of an object and of a list, by reference.

// Names of the metadata definitions custom resources' documents refer to.
const (
	ObjectMetaDefinition = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"
	ListMetaDefinition   = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta"
)

// metaTypes are the types whose definitions custom resources' documents include.
var metaTypes = []reflect.Type{reflect.TypeFor[metav1.ObjectMeta](), reflect.TypeFor[metav1.ListMeta]()}

// DiscoveryTypes are the types of /version, /api and /apis, which the OpenAPI documents of
// those paths describe.
var DiscoveryTypes = struct{ Version, APIVersions, APIGroupList reflect.Type }{
	reflect.TypeFor[version.Info](), reflect.TypeFor[metav1.APIVersions](), reflect.TypeFor[metav1.APIGroupList](),
}

// Definitions returns the definitions of the Go types (structs) and of every type they
// reach, by name, in the shape of the kinds' own.
func Definitions(types ...reflect.Type) map[string]json.RawMessage {
	set := newTypeSet()
	out := map[string]json.RawMessage{}
	for _, t := range types {
		maps.Copy(out, set.api.definitions(set, set.of(t)))
	}
	return out
}

// DefinitionName is the OpenAPI name of the Go type t.
func DefinitionName(t reflect.Type) string { return definitionName(t) }

// MetaDefinitions returns the definitions of ObjectMeta and ListMeta and of every type they
// reach, by name. It is built once per process (it depends on nothing but the Go types); the
// map is shared: read it, never change it.
var MetaDefinitions = sync.OnceValue(func() map[string]json.RawMessage { return Definitions(metaTypes...) })

// TypeMetaProperty returns the schema of TypeMeta's field "apiVersion" or "kind" as every
// object's schema has it: a string, with TypeMeta's description.
func TypeMetaProperty(name string) map[string]any {
	return map[string]any{"type": "string", "description": docTable{}.of(typeMetaDefinition)[name]}
}

// MetadataDescription is the description of an object's metadata field (of a list's, when
// list is set), as PartialObjectMetadata(List) documents it.
func MetadataDescription(list bool) string {
	if list {
		return docTable{}.of(partialListDefinition)["metadata"]
	}
	return docTable{}.of(partialObjectDefinition)["metadata"]
}

// Names of the types whose descriptions the functions above read; swaggerdoc.json.gz keeps them
// beside those of the served kinds.
const (
	typeMetaDefinition      = "io.k8s.apimachinery.pkg.apis.meta.v1.TypeMeta"
	partialObjectDefinition = "io.k8s.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata"
	partialListDefinition   = "io.k8s.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList"
)
