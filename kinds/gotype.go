package kinds

import (
	"reflect"
	"slices"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// How a Go API type (k8s.io/api) looks in JSON, read from the type itself by reflection: its
// fields with their JSON names, which are required (no omitempty, as kube-openapi decides),
// their descriptions (the SwaggerDoc methods generated beside every API type, kept in
// swaggerdoc.json.gz, read only when the OpenAPI documents are built: the writes a server makes
// at start do not decode them) and patch strategies (struct tags). Typed kinds prune, check and
// document their objects from this.

// valueKind is the JSON shape of a Go type.
type valueKind int

const (
	kindObject      valueKind = iota // a struct: known fields only
	kindArray                        // a slice
	kindMap                          // a map with string keys
	kindString                       // strings, and []byte (base64)
	kindInteger                      // ints
	kindNumber                       // floats
	kindBoolean                      //
	kindIntOrString                  // intstr.IntOrString
	kindQuantity                     // resource.Quantity: a string or a number
	kindTime                         // metav1.Time, metav1.MicroTime: RFC 3339 strings
	kindDuration                     // metav1.Duration: a Go duration string
	kindAny                          // runtime.RawExtension, metav1.FieldsV1: any JSON object
)

// goType is one Go type's JSON shape. Object types keep their fields; arrays and maps their
// element type. goTypes are built once per typeSet and never change afterwards.
type goType struct {
	t    reflect.Type
	kind valueKind
	// name is the OpenAPI definition name of a named struct or special type
	// ("io.k8s.api.apps.v1.DeploymentSpec"); empty for plain values.
	name   string
	format string // OpenAPI format: int32, int64, double, byte, date-time
	fields map[string]*goField
	order  []string // field names, sorted
	elem   *goType
}

// goField is one JSON field of an object type.
type goField struct {
	name     string
	typ      *goType
	required bool
	pointer  bool // the Go field is a pointer
	// docOf is the OpenAPI name of the type that declares the field (an embedded struct's for
	// a promoted field), whose descriptions hold the field's.
	docOf string
	// patchStrategy and patchMergeKey are the strategic merge patch tags.
	patchStrategy, patchMergeKey string
}

// typeSet builds and keeps the goTypes of one Registry's typed kinds (each Registry has its
// own; only client-go's structured-merge-diff schema, read-only, is shared: smd.go). Safe for
// concurrent use.
type typeSet struct {
	mu    sync.Mutex
	types map[reflect.Type]*goType // guarded by mu
	smd   smdSchema
	api   openAPICache
	docs  docTable
}

func newTypeSet() *typeSet { return &typeSet{types: map[reflect.Type]*goType{}} }

// of returns the goType of t (a struct type, or a pointer to one).
func (ts *typeSet) of(t reflect.Type) *goType {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.ofLocked(t)
}

var (
	timeType        = reflect.TypeFor[metav1.Time]()
	microTimeType   = reflect.TypeFor[metav1.MicroTime]()
	durationType    = reflect.TypeFor[metav1.Duration]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
	intOrStringType = reflect.TypeFor[intstr.IntOrString]()
	rawType         = reflect.TypeFor[runtime.RawExtension]()
	fieldsV1Type    = reflect.TypeFor[metav1.FieldsV1]()
	bytesType       = reflect.TypeFor[[]byte]()
)

func (ts *typeSet) ofLocked(t reflect.Type) *goType {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if g, ok := ts.types[t]; ok {
		return g
	}
	g := &goType{t: t}
	ts.types[t] = g // before the fields: a recursive type finds itself
	switch t {
	case timeType, microTimeType:
		g.kind, g.format = kindTime, "date-time"
	case durationType:
		g.kind = kindDuration
	case quantityType:
		g.kind = kindQuantity
	case intOrStringType:
		g.kind, g.format = kindIntOrString, "int-or-string"
	case rawType, fieldsV1Type:
		g.kind = kindAny
	case bytesType:
		g.kind, g.format = kindString, "byte"
	}
	if g.kind != kindObject {
		if t.Name() != "" && t.PkgPath() != "" {
			g.name = definitionName(t)
		}
		return g
	}
	switch t.Kind() {
	case reflect.Struct:
		g.name = definitionName(t)
		g.fields = map[string]*goField{}
		ts.addFields(g, t)
		for n := range g.fields {
			g.order = append(g.order, n)
		}
		slices.Sort(g.order)
	case reflect.Slice, reflect.Array:
		g.kind, g.elem = kindArray, ts.ofLocked(t.Elem())
	case reflect.Map:
		g.kind, g.elem = kindMap, ts.ofLocked(t.Elem())
	case reflect.String:
		g.kind = kindString
	case reflect.Bool:
		g.kind = kindBoolean
	case reflect.Int32, reflect.Uint32, reflect.Int16, reflect.Uint16, reflect.Int8, reflect.Uint8:
		g.kind, g.format = kindInteger, "int32"
	case reflect.Int, reflect.Int64, reflect.Uint, reflect.Uint64:
		g.kind, g.format = kindInteger, "int64"
	case reflect.Float32, reflect.Float64:
		g.kind, g.format = kindNumber, "double"
	default:
		g.kind = kindAny
	}
	return g
}

// addFields adds the JSON fields of struct t to g, following encoding/json: embedded structs
// without a JSON name (`json:",inline"`) promote their fields.
func (ts *typeSet) addFields(g *goType, t reflect.Type) {
	declaredIn := definitionName(t)
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				ts.addFields(g, ft)
				continue
			}
		}
		if name == "" {
			name = f.Name
		}
		omitempty := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
		if optionalFields[g.name+"."+name] {
			omitempty = true
		}
		g.fields[name] = &goField{
			name: name, typ: ts.ofLocked(f.Type), required: !omitempty, pointer: f.Type.Kind() == reflect.Pointer, docOf: declaredIn,
			patchStrategy: f.Tag.Get("patchStrategy"), patchMergeKey: f.Tag.Get("patchMergeKey"),
		}
	}
}

// optionalFields are fields the Go types leave without omitempty but the API documents as
// optional (+optional, which only the source comments say).
var optionalFields = map[string]bool{
	"io.k8s.api.apps.v1.StatefulSetSpec.serviceName":             true,
	"io.k8s.api.core.v1.TypedLocalObjectReference.apiGroup":      true,
	"io.k8s.api.core.v1.TypedObjectReference.apiGroup":           true,
	"io.k8s.api.core.v1.GRPCAction.service":                      true,
	"io.k8s.api.core.v1.EvictionResponder.priority":              true,
	"io.k8s.api.core.v1.NodeAllocatableMappedResources.quantity": true,
}

// definitionName is the OpenAPI name of a Go type: the one its OpenAPIModelName method gives
// (generated beside the API types), else as kube-openapi makes it: the package path with its
// domain reversed ("k8s.io/api/apps/v1" → "io.k8s.api.apps.v1") and the type name.
func definitionName(t reflect.Type) string {
	if n, ok := reflect.Zero(t).Interface().(interface{ OpenAPIModelName() string }); ok {
		return n.OpenAPIModelName()
	}
	pkg := t.PkgPath()
	domain, rest, _ := strings.Cut(pkg, "/")
	parts := strings.Split(domain, ".")
	slices.Reverse(parts)
	name := strings.Join(parts, ".")
	if rest != "" {
		name += "." + strings.ReplaceAll(rest, "/", ".")
	}
	return name + "." + t.Name()
}
