package crd

import (
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"strings"

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
	pruneObject(obj, s.props, "", true, &unknown)
	sort.Strings(unknown)
	return unknown
}

func pruneValue(v any, s *apiextv1.JSONSchemaProps, path string, unknown *[]string) {
	if s == nil {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		pruneObject(v, s, path, false, unknown)
	case []any:
		if s.Items == nil || s.Items.Schema == nil {
			return
		}
		for i, e := range v {
			v[i] = integral(e, s.Items.Schema)
			pruneValue(e, s.Items.Schema, path+"["+strconv.Itoa(i)+"]", unknown)
		}
	}
}

func pruneObject(m map[string]any, s *apiextv1.JSONSchemaProps, path string, root bool, unknown *[]string) {
	if s == nil {
		return
	}
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
		child := joinPath(path, key)
		if prop, ok := s.Properties[key]; ok {
			m[key] = integral(v, &prop)
			pruneValue(v, &prop, child, unknown)
			continue
		}
		if additional != nil {
			pruneValue(v, additional, child, unknown)
			continue
		}
		if additionalAllowed || preserve {
			continue
		}
		delete(m, key)
		*unknown = append(*unknown, child)
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
	defaultObject(obj, s.props, true)
}

func defaultValue(v any, s *apiextv1.JSONSchemaProps) {
	if s == nil {
		return
	}
	switch v := v.(type) {
	case map[string]any:
		defaultObject(v, s, false)
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for _, e := range v {
				defaultValue(e, s.Items.Schema)
			}
		}
	}
}

func defaultObject(m map[string]any, s *apiextv1.JSONSchemaProps, root bool) {
	if s == nil {
		return
	}
	for key, prop := range s.Properties {
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
			defaultValue(v, &prop)
		}
	}
	if ap := s.AdditionalProperties; ap != nil && ap.Schema != nil {
		for key, v := range m {
			if _, known := s.Properties[key]; !known {
				defaultValue(v, ap.Schema)
			}
		}
	}
}

// decodeDefault decodes a schema default freshly each time, so objects never share it.
func decodeDefault(raw []byte) (any, error) {
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}
