package cache_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
)

// The store's half of the recorder's shortcut (create_fast.go); FuzzRecorderEvent, in package
// events, holds what it stores to what Create stores for the same Event.

// TestCreateEncoded: an object its writer encoded is stored with its version in place of the
// placeholder, indexed as given, and refused when it cannot be versioned or already exists.
func TestCreateEncoded(t *testing.T) {
	s := cache.New(cache.Config{})
	defer s.Close()
	key := cache.Key{Resource: "events", Namespace: "ns", Name: "e1"}
	enc := func(body string) cache.Encoded {
		return cache.Encoded{JSON: []byte(body), UID: "u1", Generation: 1, Fields: []string{"type", "Normal", "reason", "Created"}}
	}
	good := `{"metadata":{"name":"e1","resourceVersion":"` + cache.RVPlaceholder + `","uid":"u1"},"reason":"Created","type":"Normal"}`
	buf := []byte(good)
	o, err := s.CreateEncoded(t.Context(), key, cache.Encoded{JSON: buf, UID: "u1", Generation: 1, Fields: []string{"type", "Normal", "reason", "Created"}}, cache.WriteOptions{})
	if !assert.NoError(t, err) {
		return
	}
	copy(buf, "xxxxxxxx") // the caller may reuse its buffer
	got, err := s.Get(t.Context(), key)
	assert.NoError(t, err)
	assert.Same(t, o, got)
	assert.Equal(t, s.ResourceVersion(), o.ResourceVersion())
	assert.Contains(t, string(o.Raw()), `"resourceVersion":"`+strconv.FormatUint(o.ResourceVersion(), 10)+`"`)
	assert.True(t, json.Valid(o.Raw()))
	assert.Equal(t, "u1", o.UID())
	assert.Equal(t, "Created", o.Field("reason"))
	assert.Equal(t, "Normal", o.Field("type"))

	_, err = s.CreateEncoded(t.Context(), key, enc(good), cache.WriteOptions{})
	assert.ErrorIs(t, err, cache.ErrAlreadyExists)
	for name, at := range map[string]int{"told": strings.Index(good, `"resourceVersion"`), "told wrong": 3} {
		e := enc(good)
		e.VersionAt = at
		k := cache.Key{Resource: "events", Namespace: "ns", Name: "at-" + strings.ReplaceAll(name, " ", "-")}
		o, err := s.CreateEncoded(t.Context(), k, e, cache.WriteOptions{})
		if assert.NoError(t, err, name) {
			assert.Contains(t, string(o.Raw()), `"resourceVersion":"`+strconv.FormatUint(o.ResourceVersion(), 10)+`"`, name)
			assert.True(t, json.Valid(o.Raw()), name)
		}
	}
	other := cache.Key{Resource: "events", Namespace: "ns", Name: "e2"}
	for _, body := range []string{`{"metadata":{"name":"e2"}}`, `{"a":{"resourceVersion":"` + cache.RVPlaceholder + `"},"metadata":{"resourceVersion":"` + cache.RVPlaceholder + `"}}`} {
		_, err = s.CreateEncoded(t.Context(), other, enc(body), cache.WriteOptions{})
		assert.ErrorIs(t, err, cache.ErrInvalid, body)
	}
	_, err = s.CreateEncoded(t.Context(), other, enc(good), cache.WriteOptions{DryRun: true})
	assert.ErrorIs(t, err, cache.ErrInvalid, "no dry run")
}

// TestEncodeEncoded: a watch cache (package etcd's) takes an object its writer encoded as the
// value to store, the placeholder member cut out with its comma, exactly what Encode makes of
// the same object decoded; it refuses one whose version it cannot find.
func TestEncodeEncoded(t *testing.T) {
	c := cache.NewWatchCache(cache.Config{})
	defer c.Close()
	key := cache.Key{Resource: "events", Namespace: "ns", Name: "e1"}
	ph := `"resourceVersion":"` + cache.RVPlaceholder + `"`
	for _, tt := range []struct{ name, body string }{
		{"member in the middle", `{"metadata":{"name":"e1",` + ph + `,"uid":"u1"},"reason":"Created"}`},
		{"first member", `{"metadata":{` + ph + `,"name":"e1"},"reason":"Created"}`},
		{"last member", `{"metadata":{"name":"e1",` + ph + `},"reason":"Created"}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, at := range []int{0, strings.Index(tt.body, `"resourceVersion"`), 3} {
				e := cache.Encoded{JSON: []byte(tt.body), VersionAt: at, UID: "u1", Generation: 1, Fields: []string{"reason", "Created"}}
				o, err := c.EncodeEncoded(key, e)
				if !assert.NoError(t, err, "versionAt %d", at) {
					continue
				}
				var m map[string]any
				assert.NoError(t, json.Unmarshal([]byte(tt.body), &m))
				want, err := c.Encode(key, m)
				assert.NoError(t, err)
				assert.Equal(t, string(want.Raw()), string(o.Raw()), "versionAt %d", at)
				assert.Equal(t, "Created", o.Field("reason"))
				assert.Equal(t, "u1", o.UID())
				at7, err := c.AtVersion(o, 7)
				assert.NoError(t, err)
				assert.Contains(t, string(at7.Raw()), `"resourceVersion":"7"`)
				assert.True(t, json.Valid(at7.Raw()))
			}
		})
	}
	for _, body := range []string{`{"metadata":{"name":"e1"}}`, `{"metadata":{` + ph + `}}`, `{"a":{` + ph + `},"metadata":{` + ph + `,"name":"e1"}}`} {
		_, err := c.EncodeEncoded(key, cache.Encoded{JSON: []byte(body)})
		assert.ErrorIs(t, err, cache.ErrInvalid, body)
	}
}
