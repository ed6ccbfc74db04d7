package registry

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	kjson "sigs.k8s.io/json"
)

// TestNumbersFit: numberFits agrees with kube-apiserver's JSON decoding (sigs.k8s.io/json into
// an interface: an int64, else a float64, else an error), without parsing the usual numbers.
func TestNumbersFit(t *testing.T) {
	for _, n := range []string{
		"0", "-1", "9223372036854775807", "9223372036854775808", "1.5", "1e308", "1e309", "-1e400",
		"1e-400", "1E400", strings.Repeat("9", 300), strings.Repeat("9", 309), strings.Repeat("9", 400),
		"0." + strings.Repeat("3", 1000), strings.Repeat("9", 3_000_000),
	} {
		var v any
		want := kjson.UnmarshalCaseSensitivePreserveInts([]byte(n), &v) == nil
		assert.Equal(t, want, numberFits(json.Number(n)), "%.40s", n)
		assert.Equal(t, want, numbersFit(map[string]any{"a": []any{"x", json.Number(n)}}), "%.40s", n)
	}
}

// FuzzNumberFits: numberFits agrees with kube-apiserver's JSON decoding on any JSON number.
func FuzzNumberFits(f *testing.F) {
	for _, n := range []string{"1", "1e400", "123456789012345678901234567890", "-0.5e-10"} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n string) {
		var num json.Number
		if json.Unmarshal([]byte(n), &num) != nil || num.String() != n {
			return // not a JSON number
		}
		var v any
		want := kjson.UnmarshalCaseSensitivePreserveInts([]byte(n), &v) == nil
		if got := numberFits(num); got != want {
			t.Fatalf("numberFits(%q) = %v, kube-apiserver's decoding %v", n, got, want)
		}
	})
}
