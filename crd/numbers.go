package crd

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"

	"github.com/opemu/opemu/internal/jsontree"
)

// Objects here hold their numbers as json.Number (cache.DecodeJSON, internal/jsonfast), so
// integers of any size survive exactly. kube-apiserver decodes a custom resource's numbers into
// int64 when they are integers and float64 otherwise, and its validators (the OpenAPI schema
// validator, CEL, the scale paths) work on those. The functions below move between the two.

// toUnstructured returns v with its numbers as kube-apiserver's decoding makes them (int64 when
// the text is an integer that fits, float64 otherwise; Go integers as int64). It copies only the
// objects and arrays on the way to a converted number and shares the rest with v: the
// validators given it only read.
func toUnstructured(v any) any {
	out, _ := kubeNumbers(v)
	return out
}

// kubeNumbers is toUnstructured, saying whether anything changed.
func kubeNumbers(v any) (any, bool) { return jsontree.Rewrite(v, kubeLeaf) }

// kubeLeaf is kubeNumbers of a leaf.
func kubeLeaf(v any) (any, bool) {
	switch v := v.(type) {
	case json.Number:
		if i, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			return i, true
		}
		// Out of float64's range, f is infinite: the validators refuse it for its type.
		// (kube-apiserver refuses the body when decoding it, 400.)
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil && !math.IsInf(f, 0) {
			return v, false
		}
		return f, true
	case int:
		return int64(v), true
	case int32:
		return int64(v), true
	case float32:
		return kubeNumber(float64(v)), true
	case float64:
		// Written into an object by Go code: what its JSON text would decode to.
		if n := kubeNumber(v); n != any(v) {
			return n, true
		}
	}
	return v, false
}

// kubeNumber is what the JSON text encoding/json writes for f decodes to in kube-apiserver: an
// int64 when that text is an integer (f integral and under 1e21 in magnitude, within int64),
// f otherwise.
func kubeNumber(f float64) any {
	if f == math.Trunc(f) && math.Abs(f) < 1e21 && f >= math.MinInt64 && f < math.MaxInt64 {
		return int64(f)
	}
	return f
}

// toJSONNumbers returns v (a decoded JSON value, numbers int64 or float64) with its numbers as
// json.Number, written as encoding/json writes them. v is not modified.
func toJSONNumbers(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = toJSONNumbers(e)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = toJSONNumbers(e)
		}
		return out
	case int64:
		return json.Number(strconv.FormatInt(v, 10))
	case int:
		return json.Number(strconv.Itoa(v))
	case float64:
		if text, err := json.Marshal(v); err == nil {
			return json.Number(text)
		}
	}
	return v
}

// canonicalNumbers rewrites, in place, every number of v that kube-apiserver would not store
// as written: a number that is not an integer fitting int64 (1.0, 1.50, 1e2, 1E400 aside) is
// decoded there into a float64 and stored as encoding/json writes it (1, 1.5, 100).
func canonicalNumbers(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if n, ok := e.(json.Number); ok {
				if c, changed := canonicalNumber(n); changed {
					v[k] = c
				}
				continue
			}
			canonicalNumbers(e)
		}
	case []any:
		for i, e := range v {
			if n, ok := e.(json.Number); ok {
				if c, changed := canonicalNumber(n); changed {
					v[i] = c
				}
				continue
			}
			canonicalNumbers(e)
		}
	}
}

// canonicalNumber returns n as kube-apiserver stores it, and whether that differs from n.
func canonicalNumber(n json.Number) (json.Number, bool) {
	s := string(n)
	if !strings.ContainsAny(s, ".eE") {
		if _, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, false
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(f, 0) {
		return n, false // out of range: left for the validator to refuse
	}
	text, err := json.Marshal(f)
	if err != nil || string(text) == s {
		return n, false
	}
	return json.Number(text), true
}
