package jsonfast_test

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// requireSameAsMarshal checks that Marshal answers exactly what json.Marshal answers.
func requireSameAsMarshal(t *testing.T, v any) {
	t.Helper()
	want, wantErr := json.Marshal(v)
	got, err := jsonfast.Marshal(v)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error())
		return
	}
	require.NoError(t, err)
	require.Equal(t, string(want), string(got))
}

func TestMarshal(t *testing.T) {
	cycle := map[string]any{"a": 1}
	cycle["self"] = cycle
	deep := any(map[string]any{"leaf": "x"})
	for range 1500 {
		deep = []any{deep}
	}
	tests := []struct {
		name string
		v    any
	}{
		{name: "object", v: map[string]any{"b": json.Number("2"), "a": "x", "c": []any{true, false, nil}}},
		{name: "nil map and slice", v: map[string]any{"m": map[string]any(nil), "l": []any(nil), "e": map[string]any{}, "el": []any{}}},
		{name: "escapes", v: map[string]any{"<k&>": "a\"b\\c\n\r\t\b\f\x00\x1f<>&\u2028\u2029é\xff\xfe€"}},
		{name: "numbers", v: []any{json.Number("-0.5e+10"), json.Number(""), json.Number("0"), int64(math.MinInt64), 42}},
		{name: "invalid number", v: map[string]any{"n": json.Number("01")}},
		{name: "number with spaces", v: []any{json.Number(" 1")}},
		{name: "floats and typed values", v: map[string]any{"f": 1e21, "g": 0.000001, "h": float32(1.5), "s": []string{"<"}, "m": map[string]string{"z": "y", "a": "b"}}},
		{name: "unsupported", v: map[string]any{"c": make(chan int)}},
		{name: "NaN", v: []any{math.NaN()}},
		{name: "marshaler", v: map[string]any{"raw": json.RawMessage(` {"b": "<", "a":1} `)}},
		{name: "cycle", v: cycle},
		{name: "deep but finite", v: deep},
		{name: "top-level string", v: "plain"},
		{name: "nil", v: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			requireSameAsMarshal(t, tc.v)
		})
	}
}

// FuzzMarshal checks that Marshal equals json.Marshal on decoded JSON documents (the form
// objects are stored in) and on arbitrary strings and numbers as keys and values.
func FuzzMarshal(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"a.1","labels":{"x":"<y>"}},"count":1,"list":[1.5,-0e3,true,null,{}]}`), "a<b")
	f.Add([]byte(`[]`), "\xff\u2028")
	f.Add([]byte(`"s"`), "1e5")
	f.Fuzz(func(t *testing.T, doc []byte, s string) {
		var v any
		if decoded, err := jsonfast.DecodeObject(doc); err == nil {
			v = decoded
		}
		for _, v := range []any{v, map[string]any{s: s, "n": json.Number(s), "l": []any{s, v}}} {
			want, wantErr := json.Marshal(v)
			got, err := jsonfast.Marshal(v)
			if wantErr != nil {
				assert.EqualError(t, err, wantErr.Error())
				continue
			}
			assert.NoError(t, err)
			assert.Equal(t, string(want), string(got))
		}
	})
}

func BenchmarkEncodeJSON(b *testing.B) {
	obj, err := jsonfast.DecodeObject([]byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"app.187a","namespace":"default","uid":"3b2c","resourceVersion":"12","creationTimestamp":"2026-11-24T06:00:00Z"},"involvedObject":{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","namespace":"default","name":"app","uid":"9f1e","resourceVersion":"11"},"reason":"Created","message":"Created Application default/app","source":{"component":"opemu-apiserver","host":"h"},"count":1,"type":"Normal","severity":"Info","eventTime":null}`))
	require.NoError(b, err)
	for _, enc := range []struct {
		name string
		fn   func(any) ([]byte, error)
	}{{"fast", jsonfast.Marshal}, {"encoding-json", json.Marshal}} {
		b.Run(enc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := enc.fn(obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
