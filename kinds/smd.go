package kinds

import (
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	smdtyped "sigs.k8s.io/structured-merge-diff/v6/typed"
)

// The structured-merge-diff schema of the built-in types that ships with client-go (the one
// its apply configurations use): list and map keys, atomic structs. Parsing it takes tens of
// milliseconds (seconds under the race detector on a loaded machine) and a few MiB, so it is
// parsed on the first server-side apply or OpenAPI request that needs it, not at start, and
// once per process: it is read-only data compiled into the binary, like a compiled regexp, so
// every Registry shares it (a second Registry's first apply does not pay again).

// parsedSMD is the parsed schema: tc converts objects, schema is nil if it could not be read.
type parsedSMD struct {
	tc     managedfields.TypeConverter
	schema *smdschema.Schema
}

var loadSMD = sync.OnceValue(func() parsedSMD {
	tc := applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
	// The converter does not expose its schema; a typed value of any built-in kind does.
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	var schema *smdschema.Schema
	if tv, err := tc.ObjectToTyped(u); err == nil {
		schema = tv.Schema()
	}
	return parsedSMD{tc: tc, schema: schema}
})

// smdSchema is a Registry's handle on that schema, parsed on first use. Safe for concurrent
// use.
type smdSchema struct{}

// converter returns a TypeConverter that parses the schema when first used.
func (smdSchema) converter() managedfields.TypeConverter { return lazyConverter{} }

// field returns the structured-merge-diff type of field name of the named type typeName, or
// ok false.
func (smdSchema) field(typeName, name string) (smdschema.Atom, bool) {
	schema := loadSMD().schema
	if schema == nil {
		return smdschema.Atom{}, false
	}
	def, ok := schema.FindNamedType(typeName)
	if !ok || def.Map == nil {
		return smdschema.Atom{}, false
	}
	f, ok := def.Map.FindField(name)
	if !ok {
		return smdschema.Atom{}, false
	}
	return schema.Resolve(f.Type)
}

// named returns the structured-merge-diff type named typeName.
func (smdSchema) named(typeName string) (smdschema.Atom, bool) {
	schema := loadSMD().schema
	if schema == nil {
		return smdschema.Atom{}, false
	}
	def, ok := schema.FindNamedType(typeName)
	return def.Atom, ok
}

type lazyConverter struct{}

func (lazyConverter) ObjectToTyped(obj runtime.Object, opts ...smdtyped.ValidationOptions) (*smdtyped.TypedValue, error) {
	return loadSMD().tc.ObjectToTyped(obj, opts...)
}

func (lazyConverter) TypedToObject(v *smdtyped.TypedValue) (runtime.Object, error) {
	return loadSMD().tc.TypedToObject(v)
}
