package registry

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Numbers as Kubernetes' JSON decoding keeps them: sigs.k8s.io/json (kube-apiserver's decoder of
// bodies and patches) reads a number into an int64, else a float64, and refuses one neither
// holds (a 400-digit integer, 1e400: "json: cannot unmarshal number ... into Go value of type
// float64"), a 400 before any validation. jsonfast keeps numbers as json.Number of any length,
// as encoding/json's UseNumber does, and the schema validator then checked them with math/big:
// a 3-million-digit integer took 30.8 s. So the fast paths (decodeFast, a patch's, an apply's)
// hand a document with such a number to the general decoding, which refuses it in
// kube-apiserver's words.

// numbersFit reports whether every number in v (decoded JSON, numbers as json.Number) is one
// kube-apiserver's JSON decoding keeps.
func numbersFit(v any) bool {
	switch v := v.(type) {
	case json.Number:
		return numberFits(v)
	case map[string]any:
		for _, e := range v {
			if !numbersFit(e) {
				return false
			}
		}
	case []any:
		for _, e := range v {
			if !numbersFit(e) {
				return false
			}
		}
	}
	return true
}

// numberFits reports whether n is an int64 or a float64. Up to 300 characters without an
// exponent it is (below float64's 1.8e308) and is not parsed; longer, strconv reads it in one
// pass.
func numberFits(n json.Number) bool {
	s := string(n)
	if len(s) <= 300 && !strings.ContainsAny(s, "eE") {
		return true
	}
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}
