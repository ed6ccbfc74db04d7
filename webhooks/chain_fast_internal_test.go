package webhooks

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
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
	t.Run("a null value is kept on the general path", func(t *testing.T) {
		// The remove sends the patch to json-patch, which must still see the adds' nulls.
		obj := map[string]any{"a": "x", "b": map[string]any{"c": "1"}}
		got, err := applyPatch(obj, []PatchOperation{
			{Op: "remove", Path: "/a"},
			{Op: "add", Path: "/n", Value: nil},
			{Op: "replace", Path: "/b/c", Value: nil},
			{Op: "test", Path: "/n", Value: nil},
		})
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"n": nil, "b": map[string]any{"c": nil}}, got)
	})
	t.Run("the value is copied", func(t *testing.T) {
		v := map[string]any{"a": "b"}
		obj, err := applyPatch(map[string]any{}, []PatchOperation{{Op: "add", Path: "/m", Value: v}})
		require.NoError(t, err)
		v["a"] = "changed"
		assert.Equal(t, "b", obj["m"].(map[string]any)["a"])
	})
}

// FuzzApplyInPlace: whenever applyInPlace takes a patch, the object ends as
// evanphx/json-patch v4 leaves its encoding, or both refuse the patch.
func FuzzApplyInPlace(f *testing.F) {
	f.Add(`{"metadata":{"name":"a","labels":{"x":"1"}},"spec":{"replicas":1}}`, "add", "/spec/strategy", `"RollingUpdate"`, "add", "/metadata/labels/y", `{"z":[1,null]}`)
	f.Add(`{"a":{}}`, "replace", "/a/b", `1`, "add", "/a/b~1c~0", `true`)
	f.Add(`{"a":{"b":2}}`, "add", "/a", `{}`, "replace", "/a/b", `3`)
	f.Fuzz(func(t *testing.T, doc, op1, path1, value1, op2, path2, value2 string) {
		decode := func(s string) (any, bool) {
			d := json.NewDecoder(strings.NewReader(s))
			d.UseNumber()
			var v any
			return v, d.Decode(&v) == nil
		}
		v, ok := decode(doc)
		obj, isObject := v.(map[string]any)
		if !ok || !isObject {
			return
		}
		var ops []PatchOperation
		for _, o := range [][3]string{{op1, path1, value1}, {op2, path2, value2}} {
			val, ok := decode(o[2])
			if !ok {
				return
			}
			ops = append(ops, PatchOperation{Op: o[0], Path: o[1], Value: val})
		}
		done, err := applyInPlace(obj, ops)
		if !done {
			return
		}
		p, merr := json.Marshal(ops)
		require.NoError(t, merr)
		patch, perr := jsonpatch.DecodePatch(p)
		require.NoError(t, perr, "applyInPlace took a patch json-patch cannot read: %s", p)
		want, werr := patch.Apply([]byte(doc))
		if err != nil {
			assert.Error(t, werr, "applyInPlace refused %s, json-patch applied it", p)
			return
		}
		require.NoError(t, werr, "json-patch refused %s, applyInPlace applied it", p)
		got, merr := json.Marshal(obj)
		require.NoError(t, merr)
		assert.JSONEq(t, string(want), string(got), "patch %s on %s", p, doc)
	})
}

// TestPatchOperationJSON: the operations that take a value carry it, null included; the others
// carry none unless set.
func TestPatchOperationJSON(t *testing.T) {
	b, err := json.Marshal([]PatchOperation{
		{Op: "add", Path: "/a"}, {Op: "replace", Path: "/b"}, {Op: "test", Path: "/c"},
		{Op: "remove", Path: "/d"}, {Op: "move", From: "/e", Path: "/f"}, {Op: "add", Path: "/g", Value: "v"},
	})
	require.NoError(t, err)
	assert.JSONEq(t, `[{"op":"add","path":"/a","value":null},{"op":"replace","path":"/b","value":null},`+
		`{"op":"test","path":"/c","value":null},{"op":"remove","path":"/d"},{"op":"move","from":"/e","path":"/f"},`+
		`{"op":"add","path":"/g","value":"v"}]`, string(b))
}
