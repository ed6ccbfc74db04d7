package jsonfast_test

import (
	"bytes"
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// decodeStd decodes data as encoding/json's Decoder with UseNumber does, requiring nothing
// but white space after the value; ok is false when it refuses data.
func decodeStd(data []byte) (v any, ok bool) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return v, true
}

func TestParse(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		ok       bool // the fast path decodes it
		dups     bool
		stdFails bool // encoding/json refuses it too
	}{
		{name: "object", in: ` {"a":"b","n":-1.5e+3,"l":[true,false,null,{}],"e":[]} `, ok: true},
		{name: "escapes", in: `{"s":"a\"b\\c\/d\b\f\n\r\t\u0041\u00e9\u20ac\ud83d\ude00<>&"}`, ok: true},
		{name: "utf-8", in: `{"s":"é€😀"}`, ok: true},
		{name: "duplicate key", in: `{"a":1,"b":{"c":1,"c":2},"a":3}`, ok: true, dups: true},
		{name: "no duplicates", in: `{"a":{"a":{"a":1}}}`, ok: true},
		{name: "top-level scalar", in: `"x"`, ok: true},
		{name: "invalid UTF-8 left to encoding/json", in: "{\"s\":\"\xff\"}"},
		{name: "lone surrogate left to encoding/json", in: `{"s":"\ud800x"}`},
		{name: "trailing data", in: `{} {}`, stdFails: true},
		{name: "trailing comma", in: `{"a":1,}`, stdFails: true},
		{name: "bad number", in: `[01]`, stdFails: true},
		{name: "bad number sign", in: `[1e+]`, stdFails: true},
		{name: "control character", in: "[\"a\tb\"]", stdFails: true},
		{name: "bad escape", in: `["\x"]`, stdFails: true},
		{name: "unterminated", in: `{"a":`, stdFails: true},
		{name: "empty", in: ``, stdFails: true},
		{name: "byte order mark", in: "\ufeff{}", stdFails: true},
		{name: "too deep", in: strings.Repeat("[", 10001) + strings.Repeat("]", 10001), stdFails: true},
		{name: "deep enough", in: strings.Repeat("[", 10000) + strings.Repeat("]", 10000), ok: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, dups, ok := jsonfast.Parse([]byte(tc.in))
			want, stdOK := decodeStd([]byte(tc.in))
			assert.Equal(t, !tc.stdFails, stdOK, "encoding/json's verdict")
			require.Equal(t, tc.ok, ok)
			if ok {
				assert.Equal(t, want, v)
				assert.Equal(t, tc.dups, dups)
			}
		})
	}
}

func TestDecodeObjectFallsBack(t *testing.T) {
	m, err := jsonfast.DecodeObject([]byte("{\"s\":\"\xff\\ud800\"}"))
	require.NoError(t, err)
	assert.Equal(t, map[string]any{"s": "\ufffd\ufffd"}, m, "encoding/json's replacement characters")
	_, err = jsonfast.DecodeObject([]byte(`[1]`))
	require.Error(t, err)
	m, err = jsonfast.DecodeObject([]byte(`null`))
	require.NoError(t, err)
	assert.Nil(t, m)
}

// FuzzParse checks that whatever Parse decodes, encoding/json decodes to the same
// value, that it refuses nothing encoding/json takes except what it leaves to it on purpose,
// and that duplicates is true exactly when an object repeats a key.
func FuzzParse(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"Event","metadata":{"name":"a.1","labels":{"x":"<y>"}},"count":1,"list":[1.5,-0e3,true,null,{}]}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`["\u00e9\ud83d\ude00\n", 1E-7]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, dups, ok := jsonfast.Parse(data)
		want, stdOK := decodeStd(data)
		if !ok {
			if stdOK && utf8Valid(data) && !bytes.Contains(data, []byte(`\u`)) && !deeper(data, 10000) {
				t.Fatalf("refused what encoding/json decodes: %q", data)
			}
			return
		}
		require.True(t, stdOK, "decoded what encoding/json refuses: %q", data)
		require.Equal(t, want, v)
		if dups {
			// encoding/json keeps the last of a repeated key, so re-encoding is shorter
			// than a document holding each key once would need: check by counting keys.
			assert.Greater(t, countKeys(data), countKeysOf(v), "duplicates reported for %q", data)
		} else {
			assert.Equal(t, countKeys(data), countKeysOf(v), "duplicates missed in %q", data)
		}
	})
}

func utf8Valid(b []byte) bool { return strings.ToValidUTF8(string(b), "\ufffd") == string(b) }

// deeper reports whether data nests more than n brackets (roughly: it counts openers).
func deeper(data []byte, n int) bool {
	return bytes.Count(data, []byte("["))+bytes.Count(data, []byte("{")) > n
}

// countKeys counts the members of every object in data, with encoding/json's tokenizer.
func countKeys(data []byte) int {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	type frame struct{ object, wantKey bool }
	var stack []frame
	n := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			return n
		}
		top := len(stack) - 1
		switch tok {
		case json.Delim('{'):
			if top >= 0 && stack[top].object {
				stack[top].wantKey = true
			}
			stack = append(stack, frame{object: true, wantKey: true})
			continue
		case json.Delim('['):
			if top >= 0 && stack[top].object {
				stack[top].wantKey = true
			}
			stack = append(stack, frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:top]
			continue
		}
		if top >= 0 && stack[top].object {
			if stack[top].wantKey {
				n++
			}
			stack[top].wantKey = !stack[top].wantKey
		}
	}
}

// countKeysOf counts the members of every object in a decoded value.
func countKeysOf(v any) int {
	switch v := v.(type) {
	case map[string]any:
		n := len(v)
		for _, e := range v {
			n += countKeysOf(e)
		}
		return n
	case []any:
		n := 0
		for _, e := range v {
			n += countKeysOf(e)
		}
		return n
	}
	return 0
}

func BenchmarkParseJSON(b *testing.B) {
	data := []byte(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"load-1-2","namespace":"load-x-a1","uid":"3b2c4d5e-0000-4000-8000-000000000000","resourceVersion":"12","generation":1,"creationTimestamp":"2026-11-24T06:00:00Z"},"spec":{"replicas":3,"image":"nginx:1.27"}}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, ok := jsonfast.Parse(data); !ok {
				b.Fatal("refused")
			}
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := decodeStd(data); !ok {
				b.Fatal("refused")
			}
		}
	})
}
