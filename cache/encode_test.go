package cache_test

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSameSpec: a number compares as its JSON text, whatever Go type holds it, so an object
// stamped by Go code and the same object decoded are the same; a string is not a number, and
// metadata and status are not spec.
func TestSameSpec(t *testing.T) {
	decoded := map[string]any{"count": json.Number("42"), "spec": map[string]any{"n": json.Number("-7"), "l": []any{"a", true, nil}}}
	for _, tc := range []struct {
		name string
		obj  map[string]any
		same bool
	}{
		{"int64", map[string]any{"count": int64(42), "spec": map[string]any{"n": int64(-7), "l": []any{"a", true, nil}}}, true},
		{"int", map[string]any{"count": 42, "spec": map[string]any{"n": -7, "l": []any{"a", true, nil}}}, true},
		{"float64", map[string]any{"count": 42.0, "spec": map[string]any{"n": json.Number("-7"), "l": []any{"a", true, nil}}}, true},
		{"metadata and status differ", map[string]any{"count": json.Number("42"), "spec": map[string]any{"n": json.Number("-7"), "l": []any{"a", true, nil}}, "metadata": map[string]any{"generation": int64(3)}, "status": "x"}, true},
		{"a string for a number", map[string]any{"count": "42", "spec": map[string]any{"n": json.Number("-7"), "l": []any{"a", true, nil}}}, false},
		{"another number", map[string]any{"count": json.Number("43"), "spec": map[string]any{"n": json.Number("-7"), "l": []any{"a", true, nil}}}, false},
		{"a member more", map[string]any{"count": json.Number("42"), "extra": nil, "spec": map[string]any{"n": json.Number("-7"), "l": []any{"a", true, nil}}}, false},
		{"a member less", map[string]any{"spec": map[string]any{"n": json.Number("-7"), "l": []any{"a", true, nil}}}, false},
		{"a list item differs", map[string]any{"count": json.Number("42"), "spec": map[string]any{"n": json.Number("-7"), "l": []any{"a", false, nil}}}, false},
		{"a list shorter", map[string]any{"count": json.Number("42"), "spec": map[string]any{"n": json.Number("-7"), "l": []any{"a", true}}}, false},
		{"null for an object", map[string]any{"count": json.Number("42"), "spec": nil}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.same, cache.SameSpec(decoded, tc.obj))
			assert.Equal(t, tc.same, cache.SameSpec(tc.obj, decoded))
		})
	}
}

// TestIndexedParts: a stored object's labels, annotations, selectable fields and finalizers
// are kept together (Object's meta); each comes back whole and alone, whichever are absent.
func TestIndexedParts(t *testing.T) {
	many := map[string]any{}
	for i := range 40 { // beyond the in-place sort's small size
		many[string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	selectable := func(_ cache.GroupResource, obj map[string]any, dst []string) []string {
		if c, ok := obj["spec"].(map[string]any)["color"].(string); ok {
			dst = append(dst, "spec.size", "3", "spec.color", c)
		}
		return dst
	}
	for _, tc := range []struct {
		name                   string
		labels, annotations    map[string]any
		finalizers             []any
		color                  string
		wantLabels, wantAnnots int
		wantFields, wantFinals int
	}{
		{name: "none"},
		{name: "labels only", labels: map[string]any{"b": "2", "a": "1"}, wantLabels: 2},
		{name: "annotations only", annotations: map[string]any{"x": "y"}, wantAnnots: 1},
		{name: "fields only", color: "blue", wantFields: 2},
		{name: "finalizers only", finalizers: []any{"f/1", "f/2"}, wantFinals: 2},
		{name: "all", labels: many, annotations: map[string]any{"x": "y", "n": json.Number("1")}, finalizers: []any{"f/1"}, color: "red",
			wantLabels: 40, wantAnnots: 1, wantFields: 2, wantFinals: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := cache.New(cache.Config{SelectableFields: selectable})
			defer s.Close()
			md := map[string]any{"name": "o"}
			if tc.labels != nil {
				md["labels"] = tc.labels
			}
			if tc.annotations != nil {
				md["annotations"] = tc.annotations
			}
			if tc.finalizers != nil {
				md["finalizers"] = tc.finalizers
			}
			spec := map[string]any{}
			if tc.color != "" {
				spec["color"] = tc.color
			}
			o, err := s.Create(t.Context(), cache.Key{Resource: "things", Namespace: "ns", Name: "o"}, map[string]any{"metadata": md, "spec": spec}, cache.WriteOptions{})
			if !assert.NoError(t, err) {
				return
			}
			assert.Len(t, o.Labels(), tc.wantLabels)
			for k, v := range tc.labels {
				assert.Equal(t, v, o.Labels()[k])
			}
			assert.Len(t, o.Annotations(), tc.wantAnnots)
			assert.Len(t, o.Finalizers(), tc.wantFinals)
			if tc.wantFinals == 0 {
				assert.Nil(t, o.Finalizers())
			}
			assert.Equal(t, tc.color, o.Field("spec.color"))
			if tc.color != "" {
				assert.Equal(t, "3", o.Field("spec.size"))
			}
			assert.Equal(t, "o", o.Field("metadata.name"))
		})
	}
}

// FuzzSameSpec: two decoded objects are the same spec exactly when their encodings without
// metadata, status, apiVersion and kind are the same bytes.
func FuzzSameSpec(f *testing.F) {
	f.Add(`{"spec":{"a":1,"b":[1,"x"]},"metadata":{"n":1}}`, `{"spec":{"b":[1,"x"],"a":1}}`)
	f.Add(`{"spec":{"a":1.0}}`, `{"spec":{"a":1}}`)
	f.Add(`{"spec":null,"x":{}}`, `{"x":{},"spec":null}`)
	f.Fuzz(func(t *testing.T, a, b string) {
		ma, errA := cache.DecodeJSON([]byte(a))
		mb, errB := cache.DecodeJSON([]byte(b))
		if errA != nil || errB != nil {
			return
		}
		spec := func(m map[string]any) []byte {
			c := map[string]any{}
			for k, v := range m {
				if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
					c[k] = v
				}
			}
			raw, err := cache.EncodeJSON(c)
			require.NoError(t, err, "what was decoded encodes")
			return raw
		}
		assert.Equal(t, string(spec(ma)) == string(spec(mb)), cache.SameSpec(ma, mb), "%s / %s", a, b)
	})
}

// TestVersionWhereTheStoreWroteIt: an object whose spec holds the very member the store writes
// (the same resourceVersion, nested) still gets its version in its metadata, through an update
// and a delete, and its spec is left as it was.
func TestVersionWhereTheStoreWroteIt(t *testing.T) {
	s := cache.New(cache.Config{})
	defer s.Close()
	key := cache.Key{Resource: "things", Namespace: "ns", Name: "t"}
	o, err := s.Create(t.Context(), key, map[string]any{"metadata": map[string]any{"name": "t"}}, cache.WriteOptions{})
	require.NoError(t, err)
	next := strconv.FormatUint(o.ResourceVersion()+1, 10) // what the update below is given
	o, err = s.GuaranteedUpdate(t.Context(), key, cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
		obj, err := cur.Decode()
		if err != nil {
			return cache.Update{}, err
		}
		obj["spec"] = map[string]any{"copy": map[string]any{"resourceVersion": next}}
		return cache.Update{Object: obj}, nil
	}, cache.WriteOptions{})
	require.NoError(t, err)
	require.Equal(t, next, strconv.FormatUint(o.ResourceVersion(), 10))
	gone, err := s.Delete(t.Context(), key, cache.Preconditions{}, cache.WriteOptions{})
	require.NoError(t, err)
	obj, err := gone.Decode()
	require.NoError(t, err)
	assert.Equal(t, strconv.FormatUint(gone.ResourceVersion(), 10), obj["metadata"].(map[string]any)["resourceVersion"])
	assert.Equal(t, next, obj["spec"].(map[string]any)["copy"].(map[string]any)["resourceVersion"], "the spec is untouched")
	assert.NotEqual(t, next, strconv.FormatUint(gone.ResourceVersion(), 10))
}
