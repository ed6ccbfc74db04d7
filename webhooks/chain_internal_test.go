package webhooks

import (
	"encoding/json"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApplyPatchMatchesJSONPatch: the in-place path gives what github.com/evanphx/json-patch
// gives, for the patches it takes and for those it hands over.
func TestApplyPatchMatchesJSONPatch(t *testing.T) {
	const doc = `{"metadata":{"name":"a","labels":{"x":"1"}},"spec":{"replicas":1,"list":[1,2]}}`
	tests := []struct {
		name string
		ops  []PatchOperation
	}{
		{"add a key", []PatchOperation{{Op: "add", Path: "/spec/strategy", Value: "RollingUpdate"}}},
		{"add a map then a key in it", []PatchOperation{
			{Op: "add", Path: "/metadata/annotations", Value: map[string]any{"a": "b"}},
			{Op: "add", Path: "/metadata/annotations/c", Value: "d"},
		}},
		{"replace", []PatchOperation{{Op: "replace", Path: "/spec/replicas", Value: json.Number("3")}}},
		{"escaped key", []PatchOperation{{Op: "add", Path: "/metadata/labels/app.kubernetes.io~1managed-by", Value: "x"}}},
		{"whole object", []PatchOperation{{Op: "add", Path: "/status", Value: map[string]any{"phase": "Running", "list": []any{nil, true}}}}},
		{"array index (handed over)", []PatchOperation{{Op: "add", Path: "/spec/list/1", Value: json.Number("9")}}},
		{"remove (handed over)", []PatchOperation{{Op: "remove", Path: "/metadata/labels/x"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var obj map[string]any
			dec := json.NewDecoder(strings.NewReader(doc))
			dec.UseNumber()
			require.NoError(t, dec.Decode(&obj))
			got, err := applyPatch(obj, tt.ops)
			require.NoError(t, err)
			p, err := json.Marshal(tt.ops)
			require.NoError(t, err)
			patch, err := jsonpatch.DecodePatch(p)
			require.NoError(t, err)
			want, err := patch.Apply([]byte(doc))
			require.NoError(t, err)
			gotJSON, err := json.Marshal(got)
			require.NoError(t, err)
			assert.JSONEq(t, string(want), string(gotJSON))
		})
	}
	t.Run("missing parent fails like JSON Patch", func(t *testing.T) {
		_, err := applyPatch(map[string]any{}, []PatchOperation{{Op: "add", Path: "/a/b", Value: "c"}})
		assert.Error(t, err)
	})
	t.Run("the value is copied", func(t *testing.T) {
		v := map[string]any{"a": "b"}
		obj, err := applyPatch(map[string]any{}, []PatchOperation{{Op: "add", Path: "/m", Value: v}})
		require.NoError(t, err)
		v["a"] = "changed"
		assert.Equal(t, "b", obj["m"].(map[string]any)["a"])
	})
}
