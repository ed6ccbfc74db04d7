package crd

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestNormalizeCopiesOnlyWhatChanges checks that normalize gives every number as json.Number,
// leaves its input as it was, and shares the parts that needed no change.
func TestNormalizeCopiesOnlyWhatChanges(t *testing.T) {
	t.Parallel()
	unchanged := map[string]any{"a": json.Number("1"), "l": []any{"x", json.Number("2.5")}}
	in := map[string]any{
		"metadata": map[string]any{"name": "n", "generation": int64(3)},
		"spec":     unchanged,
		"list":     []any{1.5, float32(2), int(4), int32(5), nil, true},
	}
	out := normalize(in).(map[string]any)
	assert.Equal(t, map[string]any{
		"metadata": map[string]any{"name": "n", "generation": json.Number("3")},
		"spec":     unchanged,
		"list":     []any{json.Number("1.5"), json.Number("2"), json.Number("4"), json.Number("5"), nil, true},
	}, out)
	assert.Equal(t, int64(3), in["metadata"].(map[string]any)["generation"], "the input is not modified")
	assert.Equal(t, 1.5, in["list"].([]any)[0], "the input is not modified")
	out["spec"].(map[string]any)["shared"] = true
	assert.Equal(t, true, unchanged["shared"], "an unchanged part is shared, not copied")
	plain := map[string]any{"a": "b"}
	out2 := normalize(plain).(map[string]any)
	out2["c"] = "d"
	assert.Equal(t, "d", plain["c"], "nothing to convert: the object itself")
}
