package kinds

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	yaml "go.yaml.in/yaml/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	smdschema "sigs.k8s.io/structured-merge-diff/v6/schema"
	smdtyped "sigs.k8s.io/structured-merge-diff/v6/typed"
)

// The structured-merge-diff schema of the built-in types that ships with client-go (the one
// its apply configurations use): list and map keys, atomic structs. Parsing all of it takes
// 100-250 ms (seconds under the race detector on a loaded machine) and a few MiB, and opemu's
// own writes at start need it, so it is kept in smdtypes.go one type at a time (generated from
// client-go's by TestSMDTypes) and each type is parsed when first needed, once per process: it
// is read-only data compiled into the binary, like a compiled regexp, so every Registry shares
// it.

// smdSchema is a Registry's handle on that schema, parsed on first use. Safe for concurrent
// use.
type smdSchema struct{}

// converter returns the TypeConverter of the built-in kinds' writes: each kind's types are
// parsed on its first write, from smdtypes.go (only the types its own type reaches), not the
// whole schema.
func (smdSchema) converter() managedfields.TypeConverter { return kindConverter{} }

// field returns the structured-merge-diff type of field name of the named type typeName, or
// ok false.
func (smdSchema) field(typeName, name string) (smdschema.Atom, bool) {
	def, err := parsedType(typeName)
	if err != nil || def.Map == nil {
		return smdschema.Atom{}, false
	}
	f, ok := def.Map.FindField(name)
	if !ok {
		return smdschema.Atom{}, false
	}
	if f.Type.NamedType == nil {
		return f.Type.Inlined, true
	}
	return smdSchema{}.named(*f.Type.NamedType)
}

// named returns the structured-merge-diff type named typeName.
func (smdSchema) named(typeName string) (smdschema.Atom, bool) {
	def, err := parsedType(typeName)
	return def.Atom, err == nil
}

// kindConverter is a TypeConverter of the built-in kinds that parses, on the first object of
// a kind, only the structured-merge-diff types that kind's type reaches (from smdTypes, the
// same schema as client-go's): opemu's own writes at start (the system namespaces, the
// kubernetes Service, the Nodes, RBAC's bootstrap policy) record their ownership for well
// under a millisecond per kind, where parsing client-go's whole schema takes 100-250 ms.
type kindConverter struct{}

func (kindConverter) ObjectToTyped(obj runtime.Object, opts ...smdtyped.ValidationOptions) (*smdtyped.TypedValue, error) {
	tc, err := kindTypes(obj.GetObjectKind().GroupVersionKind())
	if err != nil {
		return nil, err
	}
	return tc.ObjectToTyped(obj, opts...)
}

// TypedToObject needs no types: any of client-go's converters makes the value an object.
func (kindConverter) TypedToObject(v *smdtyped.TypedValue) (runtime.Object, error) {
	return untypedConverter.TypedToObject(v)
}

var untypedConverter = managedfields.NewSchemeTypeConverter(clientgoscheme.Scheme, &smdtyped.Parser{})

// kindConverters holds, by GroupVersionKind, the TypeConverter of each built-in kind written
// so far (client-go's converter over the types its type reaches). Per process: read-only data,
// as the schema is.
var kindConverters sync.Map // schema.GroupVersionKind -> managedfields.TypeConverter

// kindTypes returns the TypeConverter of gvk, made on first use.
func kindTypes(gvk schema.GroupVersionKind) (managedfields.TypeConverter, error) {
	if tc, ok := kindConverters.Load(gvk); ok {
		return tc.(managedfields.TypeConverter), nil
	}
	name, err := clientgoscheme.Scheme.ToOpenAPIDefinitionName(gvk)
	if err != nil {
		return nil, err
	}
	defs, err := smdTypesFrom(name)
	if err != nil {
		return nil, err
	}
	tc := managedfields.NewSchemeTypeConverter(clientgoscheme.Scheme, &smdtyped.Parser{Schema: smdschema.Schema{Types: defs}})
	actual, _ := kindConverters.LoadOrStore(gvk, tc)
	return actual.(managedfields.TypeConverter), nil
}

// parsedTypes holds the TypeDefs of smdTypes parsed so far, by name (shared by the kinds that
// reach them, never changed after).
var parsedTypes sync.Map // string -> smdschema.TypeDef

// smdTypesFrom returns the types of smdTypes that the type named root reaches, root included.
func smdTypesFrom(root string) ([]smdschema.TypeDef, error) {
	var defs []smdschema.TypeDef
	seen := map[string]bool{}
	queue := []string{root}
	seen[root] = true
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		def, err := parsedType(name)
		if err != nil {
			return nil, err
		}
		defs = append(defs, def)
		namedTypes(def.Atom, func(n string) {
			if !seen[n] {
				seen[n] = true
				queue = append(queue, n)
			}
		})
	}
	return defs, nil
}

// parsedType returns the TypeDef of smdTypes named name, parsed on first use.
func parsedType(name string) (smdschema.TypeDef, error) {
	if def, ok := parsedTypes.Load(name); ok {
		return def.(smdschema.TypeDef), nil
	}
	i, found := slices.BinarySearchFunc(smdTypes, name, func(e smdType, name string) int { return strings.Compare(e.name, name) })
	if !found {
		return smdschema.TypeDef{}, fmt.Errorf("kinds: no structured-merge-diff type %s", name)
	}
	var def smdschema.TypeDef
	if err := yaml.Unmarshal([]byte(smdTypes[i].yaml), &def); err != nil {
		return smdschema.TypeDef{}, fmt.Errorf("kinds: structured-merge-diff type %s: %w", name, err)
	}
	actual, _ := parsedTypes.LoadOrStore(name, def)
	return actual.(smdschema.TypeDef), nil
}

// namedTypes calls f with the name of every named type atom refers to.
func namedTypes(a smdschema.Atom, f func(string)) {
	ref := func(t smdschema.TypeRef) {
		if t.NamedType != nil {
			f(*t.NamedType)
		}
		namedTypes(t.Inlined, f)
	}
	if a.Map != nil {
		for _, field := range a.Map.Fields {
			ref(field.Type)
		}
		ref(a.Map.ElementType)
	}
	if a.List != nil {
		ref(a.List.ElementType)
	}
}

// smdType is one TypeDef of client-go's schema, as YAML (smdtypes.go).
type smdType struct{ name, yaml string }
