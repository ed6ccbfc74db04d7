package crd

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestToUnstructuredCopiesOnlyWhatChanges: toUnstructured gives numbers as kube-apiserver
// decodes them (int64, else float64), leaves its input as it was, and shares the parts that
// needed no change.
func TestToUnstructuredCopiesOnlyWhatChanges(t *testing.T) {
	t.Parallel()
	unchanged := map[string]any{"a": "x", "l": []any{"y", true}}
	in := map[string]any{
		"metadata": map[string]any{"name": "n", "generation": json.Number("3")},
		"spec":     unchanged,
		"list":     []any{json.Number("1.5"), json.Number("1e2"), json.Number("99999999999999999999"), int(4), int32(5), float32(2), 3.0, 2.5, nil, true},
	}
	out := toUnstructured(in).(map[string]any)
	assert.Equal(t, map[string]any{
		"metadata": map[string]any{"name": "n", "generation": int64(3)},
		"spec":     unchanged,
		"list":     []any{1.5, 100.0, 1e20, int64(4), int64(5), int64(2), int64(3), 2.5, nil, true},
	}, out)
	assert.Equal(t, json.Number("3"), in["metadata"].(map[string]any)["generation"], "the input is not modified")
	out["spec"].(map[string]any)["shared"] = true
	assert.Equal(t, true, unchanged["shared"], "an unchanged part is shared, not copied")
	plain := map[string]any{"a": "b"}
	out2 := toUnstructured(plain).(map[string]any)
	out2["c"] = "d"
	assert.Equal(t, "d", plain["c"], "nothing to convert: the object itself")
}

// TestCanonicalNumbers: numbers are stored as kube-apiserver stores them, which decodes every
// number that is not an int64 into a float64 and writes it as encoding/json does.
func TestCanonicalNumbers(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"3": "3", "-7": "-7", "3.0": "3", "1.50": "1.5", "1e2": "100", "1E-7": "1e-7", "0.000001": "0.000001",
		"99999999999999999999": "100000000000000000000", "123456789012345678901234": "1.2345678901234569e+23", "1e21": "1e+21", "1e400": "1e400",
	} {
		obj := map[string]any{"a": json.Number(in), "l": []any{map[string]any{"b": json.Number(in)}}}
		canonicalNumbers(obj)
		assert.Equal(t, json.Number(want), obj["a"], in)
		assert.Equal(t, json.Number(want), obj["l"].([]any)[0].(map[string]any)["b"], in)
	}
}
