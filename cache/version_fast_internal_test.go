package cache

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzVersionFieldAt: finding the version member by its digits answers as searching for the
// whole member does: its one place, or -1 when it is absent or there more than once.
func FuzzVersionFieldAt(f *testing.F) {
	f.Add(`{"metadata":{"name":"a","resourceVersion":"18446744073709551615","uid":"u"}}`, rvPlaceholder)
	f.Add(`{"a":{"resourceVersion":"12"},"metadata":{"resourceVersion":"12"}}`, "12")
	f.Add(`{"x":"1212","resourceVersion":"121"}`, "12")
	f.Add(`"resourceVersion":"1"`, "1")
	f.Add(`"resourceVersion":""`, "")
	f.Fuzz(func(t *testing.T, raw, rv string) {
		field := []byte(`"resourceVersion":"` + rv + `"`)
		want := bytes.Index([]byte(raw), field)
		if want >= 0 && bytes.Contains([]byte(raw)[want+len(field):], field) {
			want = -1
		}
		assert.Equal(t, want, versionFieldAt([]byte(raw), rv), "%q in %q", rv, raw)
	})
}

// TestInsertVersion: inserting the version into an object's JSON without it gives exactly what
// encoding/json makes of the object with it, wherever the field sorts among metadata's keys.
func TestInsertVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		md   map[string]any
	}{
		{"empty metadata", map[string]any{}},
		{"only keys before", map[string]any{"name": "web", "namespace": "default"}},
		{"only keys after", map[string]any{"uid": "u"}},
		{"between", map[string]any{"name": "web", "uid": "u", "labels": map[string]any{"resourceVersion": "x"}}},
		{"nested values", map[string]any{"annotations": map[string]any{"a": `{"b":[1,"}"]}`}, "finalizers": []any{"x", "y"}, "generation": json.Number("3")}},
		{"escaped key", map[string]any{"name": "web", "<odd>": "v", "selfLink": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := map[string]any{"apiVersion": "v1", "kind": "X", "metadata": tt.md, "spec": map[string]any{"metadata": map[string]any{"z": 1}}}
			without, err := json.Marshal(obj)
			require.NoError(t, err)
			tt.md["resourceVersion"] = "12345"
			with, err := json.Marshal(obj)
			require.NoError(t, err)
			got, ok := insertVersion(without, 12345)
			require.True(t, ok)
			assert.Equal(t, string(with), string(got))
			assert.True(t, json.Valid(got))

			cur := &Object{raw: with, rv: 12345}
			assert.True(t, Unchanged(&Object{raw: without}, cur))
			delete(tt.md, "resourceVersion")
			tt.md["zz"] = "changed"
			changed, _ := json.Marshal(obj)
			assert.False(t, Unchanged(&Object{raw: changed}, cur))
		})
	}
	for _, bad := range []string{`{}`, `{"kind":"X"}`, `{"metadata":{"resourceVersion":"1"}}`, `{"metadata":"x"}`, `[1]`, `{"metadata":{"a":`} {
		_, ok := insertVersion([]byte(bad), 1)
		assert.False(t, ok, bad)
	}
	got, ok := insertVersion([]byte(`{ "metadata" : { "name" : "a" , "uid" : "b" } }`), 7)
	require.True(t, ok, "space between tokens")
	assert.True(t, json.Valid(got))
	assert.JSONEq(t, `{"metadata":{"name":"a","uid":"b","resourceVersion":"7"}}`, string(got))
}

// FuzzVersionSplice holds the version splice to the general path, encoding the object again
// with its new version: a create's or an update's encoding with rvPlaceholder given its version
// (withVersion), an encoding without a version given one (insertVersion, the etcd feed's), and
// the no-op checks (sameButVersion, Unchanged) agree with comparing those encodings.
func FuzzVersionSplice(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"X","metadata":{"name":"a","uid":"u"},"spec":{"replicas":3}}`), uint64(12345), "x")
	f.Add([]byte(`{"metadata":{"annotations":{"a":"\"resourceVersion\":\"18446744073709551615\""}}}`), uint64(1), "")
	f.Add([]byte(`{"metadata":{"<odd>":"v","zz":[1,{"}":"{"}]}}`), uint64(99), "resourceVersion")
	f.Add([]byte(`{"metadata":{"resourceVersion":"7"}}`), uint64(7), "18446744073709551615")
	f.Fuzz(func(t *testing.T, doc []byte, rv uint64, extra string) {
		obj, err := DecodeJSON(doc)
		if err != nil || obj == nil {
			return
		}
		c := New(Config{})
		key := Key{Resource: "things", Name: "a"}
		md := metadataOf(obj)
		md["x-extra"] = extra // a value that may hold the version's text
		encodeAt := func(version string) *Object {
			if version == "" {
				delete(md, "resourceVersion")
			} else {
				md["resourceVersion"] = version
			}
			o, err := c.build(key, obj)
			require.NoError(t, err)
			return o
		}
		want := encodeAt(formatRV(rv)) // the general path
		pre := encodeAt(rvPlaceholder)
		without := encodeAt("")

		if got := withVersion(pre, rvPlaceholder, rv); got != nil {
			assert.Equal(t, string(want.raw), string(got.raw), "withVersion")
			assert.Equal(t, rv, got.rv)
			assert.True(t, hasVersionFieldAt(got.raw, int(got.rvAt)-1, formatRV(rv)), "where the member is")
		} else {
			assert.Greater(t, bytes.Count(pre.raw, rvPlaceholderField), 1, "withVersion gave up on a single member")
		}
		if got, ok := insertVersion(without.raw, rv); assert.True(t, ok, "insertVersion on the store's own encoding") {
			assert.Equal(t, string(want.raw), string(got), "insertVersion")
		}
		if sameButVersion(pre.raw, want.raw, formatRV(rv)) {
			assert.Equal(t, 1, bytes.Count(pre.raw, rvPlaceholderField))
		} else {
			assert.NotEqual(t, 1, bytes.Count(pre.raw, rvPlaceholderField), "sameButVersion missed an equal object")
		}
		cur := &Object{raw: want.raw, rv: rv}
		assert.True(t, Unchanged(without, cur), "Unchanged of the same object")
		md["x-extra"] = extra + "!"
		assert.False(t, Unchanged(encodeAt(""), cur), "Unchanged of another object")
	})
}
