package crd

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/opemu/opemu/internal/jsonfast"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// rootKeep are the root fields pruning never touches.
var rootKeep = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// Prune removes, in place, every field the structural schema does not know (as Kubernetes
// does for CRDs) and returns their dotted paths, sorted: "spec.foo", "spec.items[0].x".
// x-kubernetes-preserve-unknown-fields keeps unknown fields below it; additionalProperties
// schemas are maps whose values are pruned by that schema. Integral numbers at integer fields
// (1.0, 1e2) are rewritten as integers, as Kubernetes' decoding of custom resources does.
func (s *schema) Prune(obj map[string]any) []string {
	var unknown []string
	pruneObject(s, obj, s.props, "", true, &unknown)
	sort.Strings(unknown)
	return unknown
}

// properties returns node.Properties as pointers, made once per schema node and kept by s:
// ranging over or indexing Properties copies a JSONSchemaProps (over 1 KB), and a copy whose
// address is passed down escapes to the heap, once per property of every object written.
// The schema is never modified once compiled, so the pointers stay valid.
func (s *schema) properties(node *apiextv1.JSONSchemaProps) map[string]*apiextv1.JSONSchemaProps {
	if len(node.Properties) == 0 {
		return nil
	}
	if m, ok := s.propPtrs.Load(node); ok {
		return m.(map[string]*apiextv1.JSONSchemaProps)
	}
	m := make(map[string]*apiextv1.JSONSchemaProps, len(node.Properties))
	for k, p := range node.Properties {
		m[k] = &p
	}
	actual, _ := s.propPtrs.LoadOrStore(node, m)
	return actual.(map[string]*apiextv1.JSONSchemaProps)
}

// isContainer reports whether v is an object or an array, which pruning and defaulting walk.
func isContainer(v any) bool {
	switch v.(type) {
	case map[string]any, []any:
		return true
	}
	return false
}

func pruneValue(sc *schema, v any, s *apiextv1.JSONSchemaProps, path string, unknown *[]string) {
	if s == nil {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		pruneObject(sc, v, s, path, false, unknown)
	case []any:
		if s.Items == nil || s.Items.Schema == nil {
			return
		}
		for i, e := range v {
			v[i] = integral(e, s.Items.Schema)
			if isContainer(e) {
				pruneValue(sc, e, s.Items.Schema, path+"["+strconv.Itoa(i)+"]", unknown)
			}
		}
	}
}

func pruneObject(sc *schema, m map[string]any, s *apiextv1.JSONSchemaProps, path string, root bool, unknown *[]string) {
	if s == nil {
		return
	}
	props := sc.properties(s)
	preserve := s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields
	var additional *apiextv1.JSONSchemaProps
	additionalAllowed := false
	if ap := s.AdditionalProperties; ap != nil {
		additional, additionalAllowed = ap.Schema, ap.Allows
	}
	for key, v := range m {
		if root && rootKeep[key] {
			continue
		}
		if s.XEmbeddedResource && rootKeep[key] {
			continue
		}
		if prop, ok := props[key]; ok {
			m[key] = integral(v, prop)
			if isContainer(v) {
				pruneValue(sc, v, prop, joinPath(path, key), unknown)
			}
			continue
		}
		if additional != nil {
			if isContainer(v) {
				pruneValue(sc, v, additional, joinPath(path, key), unknown)
			}
			continue
		}
		if additionalAllowed || preserve {
			continue
		}
		delete(m, key)
		*unknown = append(*unknown, joinPath(path, key))
	}
}

// integral returns v as an integer when s is an integer schema and v a non-canonical
// json.Number with an integral value; anything else is returned unchanged.
func integral(v any, s *apiextv1.JSONSchemaProps) any {
	n, ok := v.(json.Number)
	if !ok || s.Type != "integer" {
		return v
	}
	if _, err := n.Int64(); err == nil {
		return v
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return v
	}
	return json.Number(strconv.FormatInt(int64(f), 10))
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	if strings.ContainsAny(key, ".[]") {
		return path + "[" + strconv.Quote(key) + "]"
	}
	return path + "." + key
}

// Default applies the schema's `default`s in place: a missing property that has a default gets
// a copy of it; objects, maps and arrays are walked. Nothing under metadata is defaulted.
func (s *schema) Default(obj map[string]any) {
	defaultObject(s, obj, s.props, true)
}

func defaultValue(sc *schema, v any, s *apiextv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		defaultObject(sc, v, s, false)
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, e := range v {
				defaultValue(sc, e, s.Items.Schema)
			}
		}
	}
}

func defaultObject(sc *schema, m map[string]any, s *apiextv1.JSONSchemaProps, root bool) {
	if s == nil {
		return
	}
	for key, prop := range sc.properties(s) {
		if root && key == "metadata" {
			continue
		}
		v, ok := m[key]
		if !ok && prop.Default != nil {
			if d, err := decodeDefault(prop.Default.Raw); err == nil {
				m[key] = d
				v, ok = d, true
			}
		}
		if ok {
			defaultValue(sc, v, prop)
		}
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
		for key, v := range m {
			if _, known := s.Properties[key]; !known {
				defaultValue(sc, v, ap.Schema)
			}
		}
	}
}

// decodeDefault decodes a schema default freshly each time, so objects never share it. It
// runs for every defaulted field of every object written, hence internal/jsonfast.
func decodeDefault(raw []byte) (any, error) { return jsonfast.Decode(raw) }
