package cache

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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

// TestApplyAndReplace: an externally fed cache applies changes at the source's versions and
// sends them to watchers; Replace closes them with ErrGone.
func TestApplyAndReplace(t *testing.T) {
	t.Parallel()
	c := NewWatchCache(Config{StartResourceVersion: 10})
	key := Key{Group: "g", Resource: "r", Namespace: "ns", Name: "a"}
	enc, err := c.Encode(key, map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "3"}})
	require.NoError(t, err)
	assert.Zero(t, enc.ResourceVersion())
	assert.NotContains(t, string(enc.Raw()), "resourceVersion")
	w, err := c.Watch(t.Context(), WatchOptions{})
	require.NoError(t, err)
	at12, err := c.AtVersion(enc, 12)
	require.NoError(t, err)
	stored, err := c.Stored(key, enc.Raw(), 15)
	require.NoError(t, err)
	require.NoError(t, c.Apply([]Change{{Key: key, Object: at12, ResourceVersion: 12}, {Key: key, Object: stored, ResourceVersion: 15}, {Key: key, ResourceVersion: 17}}))
	var got []string
	for range 3 {
		ev := <-w.Events()
		got = append(got, string(ev.Type)+" "+formatRV(ev.ResourceVersion)+" "+formatRV(ev.Object.ResourceVersion()))
	}
	assert.Equal(t, []string{"ADDED 12 12", "MODIFIED 15 15", "DELETED 17 17"}, got)
	assert.Equal(t, uint64(17), c.ResourceVersion())
	require.NoError(t, c.WaitUntil(t.Context(), 17))

	c.Advance(20)
	assert.Equal(t, uint64(20), c.ResourceVersion())
	require.NoError(t, c.Replace([]*Object{stored}, 30))
	for range w.Events() {
	}
	require.ErrorIs(t, w.Err(), ErrGone)
	assert.Equal(t, uint64(30), c.StartResourceVersion())
	_, err = c.Watch(t.Context(), WatchOptions{ResourceVersion: 20})
	require.ErrorIs(t, err, ErrGone, "older than the refill")
	o, err := c.Get(t.Context(), key)
	require.NoError(t, err)
	assert.Same(t, stored, o)
}
