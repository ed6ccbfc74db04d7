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
// milliseconds and a few MiB, so it is parsed on the first server-side apply or OpenAPI
// request that needs it, not at start.

// builtinSMD is that schema, parsed once per process on first use and never changed after:
// every write of a built-in kind records its ownership with it (ManagedTypes), so one copy per
// Registry would cost every testenv environment its few MiB.
var builtinSMD = &smdSchema{}

// smdSchema is a copy of that schema, loaded on first use. Safe for concurrent use.
type smdSchema struct {
	once   sync.Once
	tc     managedfields.TypeConverter
	schema *smdschema.Schema
}

func (s *smdSchema) load() {
	s.once.Do(func() {
		s.tc = applyconfigurations.NewTypeConverter(clientgoscheme.Scheme)
		// The converter does not expose its schema; a typed value of any built-in kind does.
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		if tv, err := s.tc.ObjectToTyped(u); err == nil {
			s.schema = tv.Schema()
		}
	})
}

// converter returns a TypeConverter that loads the schema when first used.
func (s *smdSchema) converter() managedfields.TypeConverter { return lazyConverter{s} }

// field returns the structured-merge-diff type of field name of the named type typeName, or
// ok false.
func (s *smdSchema) field(typeName, name string) (smdschema.Atom, bool) {
	s.load()
	if s.schema == nil {
		return smdschema.Atom{}, false
	}
	def, ok := s.schema.FindNamedType(typeName)
	if !ok || def.Map == nil {
		return smdschema.Atom{}, false
	}
	f, ok := def.Map.FindField(name)
	if !ok {
		return smdschema.Atom{}, false
	}
	return s.schema.Resolve(f.Type)
}

// named returns the structured-merge-diff type named typeName.
func (s *smdSchema) named(typeName string) (smdschema.Atom, bool) {
	s.load()
	if s.schema == nil {
		return smdschema.Atom{}, false
	}
	def, ok := s.schema.FindNamedType(typeName)
	return def.Atom, ok
}

type lazyConverter struct{ s *smdSchema }

func (c lazyConverter) ObjectToTyped(obj runtime.Object, opts ...smdtyped.ValidationOptions) (*smdtyped.TypedValue, error) {
	c.s.load()
	return c.s.tc.ObjectToTyped(obj, opts...)
}

func (c lazyConverter) TypedToObject(v *smdtyped.TypedValue) (runtime.Object, error) {
	c.s.load()
	return c.s.tc.TypedToObject(v)
}
