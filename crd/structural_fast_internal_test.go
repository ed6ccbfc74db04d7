package crd

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// structuralSchemas are the schemas the walks of structural_fast.go are held to apiextensions'
// pruning and defaulting on: the Application's, and one with every construct they treat.
var structuralSchemas = map[string]string{
	"application": "", // filled from the built-in CRD
	"constructs": `
type: object
properties:
  spec:
    type: object
    default: {}
    properties:
      size: {type: integer, default: 3}
      name: {type: string, nullable: true, default: x}
      note: {type: string}
      maybe: {type: string, nullable: true}
      nested:
        type: object
        default: {a: {}}
        properties:
          a:
            type: object
            properties:
              b: {type: string, default: deep}
      free: {type: object, x-kubernetes-preserve-unknown-fields: true, properties: {known: {type: object, properties: {k: {type: string}}}}}
      labels: {type: object, additionalProperties: {type: string, default: none}}
      maps: {type: object, additionalProperties: {type: object, properties: {v: {type: integer, default: 1}}}}
      list: {type: array, items: {type: object, properties: {n: {type: string, default: item}, "a.b": {type: string}}}}
      strings: {type: array, items: {type: string, default: s}}
      child:
        type: object
        x-kubernetes-embedded-resource: true
        properties:
          spec: {type: object, properties: {x: {type: integer, default: 7}}}
      anything: {x-kubernetes-preserve-unknown-fields: true}
      port: {x-kubernetes-int-or-string: true}
  status:
    type: object
    properties:
      phase: {type: string}
`,
}

func structuralFixtures(t testing.TB) map[string]*compiled {
	t.Helper()
	out := map[string]*compiled{}
	for name, src := range structuralSchemas {
		var props *apiextv1.JSONSchemaProps
		if src == "" {
			props = builtInApplicationSchema(t)
		} else {
			props = new(apiextv1.JSONSchemaProps)
			require.NoError(t, yaml.Unmarshal([]byte(src), props))
		}
		c, err := compileSchema(props)
		require.NoError(t, err)
		out[name] = c
	}
	return out
}

// kubePruneDefault is what the walks shortcut: apiextensions' pruning (with the unknown
// fields' paths), its removal of nulls and its defaulting, in the order kube-apiserver runs
// them.
func kubePruneDefault(c *compiled, obj any) []string {
	ss, err := c.structural()
	if err != nil {
		panic(err)
	}
	// The defaults as objects hold numbers here (json.Number), as the walks' fill has them.
	defaults := ss.DeepCopy()
	numbersOfDefaults(defaults)
	unknown := structuralpruning.PruneWithOptions(obj, ss, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	structuraldefaulting.PruneNonNullableNullsWithoutDefaults(obj, ss)
	structuraldefaulting.Default(obj, defaults)
	return unknown
}

func fastPruneDefault(c *compiled, obj any) []string {
	unknown := pruneRoot(obj, c.prune)
	pruneNulls(obj, c.prune)
	applyDefaults(obj, c.fill)
	return unknown
}

func TestPruneDefaultAsApiextensions(t *testing.T) {
	t.Parallel()
	schemas := structuralFixtures(t)
	for _, src := range []string{
		`{"apiVersion":"a/v1","kind":"K","metadata":{"name":"n","x":1},"top":1,"spec":{"size":null,"name":null,"maybe":null,"note":null,"gone":{"a":1},
			"free":{"kept":1,"known":{"k":"v","drop":2}},"labels":{"a":null,"b":"c"},"maps":{"m":{},"n":null},"list":[{"x":1},null,{"a.b":"c"}],
			"strings":[null,"t"],"child":{"apiVersion":"v1","kind":"C","metadata":{"name":"c"},"spec":{},"junk":true},"anything":{"z":[1]}}}`,
		`{"spec":null,"status":{"phase":"P","extra":[1,{"a":2}]}}`,
		`{}`,
		`{"spec":{"nested":null,"list":[],"strings":[]}}`,
	} {
		for name, c := range schemas {
			a, b := decodeNumbers(t, src), decodeNumbers(t, src)
			assert.Equal(t, kubePruneDefault(c, a), fastPruneDefault(c, b), "%s: %s", name, src)
			assert.Equal(t, a, b, "%s: %s", name, src)
		}
	}
}

// FuzzPruneDefault: whatever the object, the walks of structural_fast.go remove, report and
// default exactly what apiextensions' pruning and defaulting do.
func FuzzPruneDefault(f *testing.F) {
	for _, seed := range []string{
		`{"spec":{"image":"nginx","replicas":3,"foo":1},"status":{"conditions":[{"type":"a","x":1}]}}`,
		`{"spec":{"size":null,"labels":{"a":null},"list":[null,{"n":null}],"child":{"kind":"K","spec":{}},"free":{"a":{"b":1}}}}`,
		`{"metadata":{"a":1},"apiVersion":1,"spec":[1,{"x":null}],"kind":null}`,
		`[1,2]`, `null`, `"x"`, `{"spec":{"maps":{"a":null,"b":{"v":null}}}}`,
	} {
		f.Add(seed)
	}
	schemas := structuralFixtures(f)
	f.Fuzz(func(t *testing.T, src string) {
		d := json.NewDecoder(bytes.NewReader([]byte(src)))
		d.UseNumber()
		var v any
		if d.Decode(&v) != nil {
			return
		}
		for name, c := range schemas {
			a, b := runtime.DeepCopyJSONValue(v), runtime.DeepCopyJSONValue(v)
			ka, fb := kubePruneDefault(c, a), fastPruneDefault(c, b)
			if !reflect.DeepEqual(ka, fb) || !reflect.DeepEqual(a, b) {
				t.Fatalf("%s: %s: apiextensions %v %v, fast %v %v", name, src, ka, a, fb, b)
			}
		}
	})
}
