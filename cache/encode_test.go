package cache_test

import (
	"encoding/json"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/stretchr/testify/assert"
)

// TestSpecHashNumbers: a number hashes as its JSON text, whatever Go type holds it, so an
// object stamped by Go code and the same object decoded hash alike; a string does not.
func TestSpecHashNumbers(t *testing.T) {
	decoded := cache.SpecHash(map[string]any{"count": json.Number("42"), "spec": map[string]any{"n": json.Number("-7")}})
	for _, v := range []map[string]any{
		{"count": int64(42), "spec": map[string]any{"n": int64(-7)}},
		{"count": 42, "spec": map[string]any{"n": -7}},
		{"count": 42.0, "spec": map[string]any{"n": json.Number("-7")}},
	} {
		assert.Equal(t, decoded, cache.SpecHash(v), "%v", v)
	}
	assert.NotEqual(t, decoded, cache.SpecHash(map[string]any{"count": "42", "spec": map[string]any{"n": json.Number("-7")}}))
	assert.Equal(t, decoded, cache.SpecHash(map[string]any{"count": json.Number("42"), "spec": map[string]any{"n": json.Number("-7")}, "metadata": map[string]any{"generation": int64(3)}}), "metadata is not spec")
}
