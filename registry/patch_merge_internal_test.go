package registry

import (
	"testing"

	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/stretchr/testify/require"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// FuzzMergeInto: for an object and an object patch jsonfast reads without a repeated field,
// mergeInto gives what evanphx/json-patch's MergePatch (kube-apiserver's) gives on their
// encodings, leaves the patch as it was, and shares nothing with it.
func FuzzMergeInto(f *testing.F) {
	for _, seed := range [][2]string{
		{`{"a":1,"b":{"c":2,"d":[1,{"e":null}]}}`, `{"b":{"c":null,"x":{"y":null,"z":1}},"f":[{"g":null},null]}`},
		{`{"a":{"b":1}}`, `{"a":[{"c":null}]}`},          // an array replacing an object keeps its nulls
		{`{"a":[1]}`, `{"a":{"b":null,"c":{"d":null}}}`}, // an object replacing an array loses them
		{`{"a":null}`, `{"a":{"b":null}}`},
		{`{"a":"s","b":{}}`, `{"a":null,"b":null,"c":null}`},
		{`{"a":{"b":{"c":1}}}`, `{"a":{"b":"x"}}`},
		{`{}`, `{}`},
		{`{"n":1.50,"s":"\u00e9"}`, `{"m":1e3,"n":-0}`},
	} {
		f.Add([]byte(seed[0]), []byte(seed[1]))
	}
	f.Fuzz(func(t *testing.T, docRaw, patchRaw []byte) {
		dv, repeats, ok := jsonfast.Parse(docRaw)
		doc, isObject := dv.(map[string]any)
		if !ok || repeats || !isObject {
			return
		}
		pv, repeats, ok := jsonfast.Parse(patchRaw)
		patch, isObject := pv.(map[string]any)
		if !ok || repeats || !isObject {
			return
		}
		wantRaw, err := jsonpatch.MergePatch(docRaw, patchRaw)
		require.NoError(t, err)
		want, _, ok := jsonfast.Parse(wantRaw)
		require.True(t, ok, "%s", wantRaw)
		before := canonicalJSON(t, patch)

		got := mergeInto(doc, patch)
		require.Equal(t, want, any(got), "doc %s\npatch %s", docRaw, patchRaw)
		require.Equal(t, before, canonicalJSON(t, patch), "the patch changed")
		mark(got)
		require.Equal(t, before, canonicalJSON(t, patch), "the result shares a value with the patch")
	})
}

// mark adds a member to every object in v and an element to every array.
func mark(v any) {
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			mark(e)
		}
		v["\x00mark"] = true
	case []any:
		for _, e := range v {
			mark(e)
		}
		if len(v) > 0 {
			v[0] = "\x00mark"
		}
	}
}
