package jsonfast_test

import (
	"encoding/json"
	"testing"

	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendWithout(t *testing.T) {
	tests := []struct {
		name, in, want string
		drop           []string
	}{
		{"first and middle", `{"apiVersion":"v1","data":{"kind":"x"},"kind":"ConfigMap","metadata":{"name":"a"}}`, `{"data":{"kind":"x"},"metadata":{"name":"a"}}`, []string{"apiVersion", "kind"}},
		{"not first", `{"action":"a","apiVersion":"v1","kind":"Event","metadata":{}}`, `{"action":"a","metadata":{}}`, []string{"apiVersion", "kind"}},
		{"last", `{"a":1,"kind":"K"}`, `{"a":1}`, []string{"kind"}},
		{"the last two", `{"a":1,"apiVersion":"v1","kind":"K"}`, `{"a":1}`, []string{"apiVersion", "kind"}},
		{"everything", `{"apiVersion":"v1","kind":"K"}`, `{}`, []string{"apiVersion", "kind"}},
		{"absent", `{"a":[1,{"kind":2}]}`, `{"a":[1,{"kind":2}]}`, []string{"apiVersion", "kind"}},
		{"empty", `{}`, `{}`, []string{"kind"}},
		{"spaces", `{ "kind" : "K" , "a" : "b" }`, `{ "a" : "b" }`, []string{"kind"}},
		{"strings holding quotes and braces", `{"a":"x\"}{,","kind":"K","z":"\\"}`, `{"a":"x\"}{,","z":"\\"}`, []string{"kind"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := jsonfast.AppendWithout([]byte("prefix:"), []byte(tt.in), tt.drop...)
			require.True(t, ok)
			assert.Equal(t, "prefix:"+tt.want, string(got))
		})
	}
	for _, refused := range []string{`{"ki\u006ed":"K"}`, `[1]`, `{"a":}`, `{"a" 1}`, `"kind"`} {
		got, ok := jsonfast.AppendWithout(nil, []byte(refused), "kind")
		assert.False(t, ok, refused)
		assert.Empty(t, got)
	}
}

func TestMember(t *testing.T) {
	v, found, ok := jsonfast.Member([]byte(`{"apiVersion":"v1","metadata":{"name":"a","labels":{"x":"}"}},"spec":{}}`), "metadata")
	require.True(t, ok)
	require.True(t, found)
	assert.Equal(t, `{"name":"a","labels":{"x":"}"}}`, string(v))
	_, found, ok = jsonfast.Member([]byte(`{"a":1}`), "metadata")
	assert.True(t, ok)
	assert.False(t, found)
}

// FuzzMembers holds AppendWithout and Member to encoding/json: for a JSON object without
// repeated keys, whatever they answer is what decoding it says.
func FuzzMembers(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","data":{"a":"1"},"kind":"ConfigMap","metadata":{"name":"a"}}`))
	f.Add([]byte(`{"action":"x","apiVersion":"v1","kind":"Event","metadata":{}}`))
	f.Add([]byte(`{"kind":"K"}`))
	f.Add([]byte(` { "z" : [1, "]"] , "kind" : null } `))
	f.Fuzz(func(t *testing.T, data []byte) {
		want, ok := decodeStd(data)
		obj, isObject := want.(map[string]any)
		if !ok || !isObject {
			return
		}
		if _, dups, ok := jsonfast.Parse(data); !ok || dups {
			return
		}
		meta, found, ok := jsonfast.Member(data, "metadata")
		if ok {
			wantMeta, has := obj["metadata"]
			require.Equal(t, has, found, "%q", data)
			if found {
				got, ok := decodeStd(meta)
				require.True(t, ok, "%q", data)
				require.Equal(t, wantMeta, got, "%q", data)
			}
		}
		out, ok := jsonfast.AppendWithout(nil, data, "apiVersion", "kind")
		if !ok {
			return
		}
		got, ok := decodeStd(out)
		require.True(t, ok, "AppendWithout(%q) = %q, not JSON", data, out)
		delete(obj, "apiVersion")
		delete(obj, "kind")
		require.Equal(t, any(obj), got, "%q", data)
		if compact, err := json.Marshal(want); err == nil && string(compact) == string(data) {
			// A compact document loses the members and nothing else.
			wantOut, _ := json.Marshal(obj)
			require.Equal(t, string(wantOut), string(out))
		}
	})
}
