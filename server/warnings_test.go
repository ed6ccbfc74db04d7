package server_test

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWarningsCapped: a request's warnings are capped as kube-apiserver's recorder caps them:
// each distinct message once, whole while they fit in 4,096 characters; the one that passes
// that cuts every message to 256 characters and ends the list (20 unknown fields of 250-character
// names: 16 warnings, each cut; recorded from kube-apiserver as the conformance case
// limits-warnings-custom). 20,000 unknown fields answer about 4 KB (150,000: test/e2e).
func TestWarningsCapped(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	unknown := func(n int, name func(int) string) string {
		fields := make([]string, n)
		for i := range fields {
			fields[i] = fmt.Sprintf("%q:1", name(i))
		}
		return `{"replicas":1,"image":"nginx:1",` + strings.Join(fields, ",") + `}`
	}
	texts := func(r response) []string {
		var out []string
		for _, w := range r.header.Values("Warning") {
			require.True(t, strings.HasPrefix(w, `299 - "`) && strings.HasSuffix(w, `"`), w)
			out = append(out, strings.ReplaceAll(w[len(`299 - "`):len(w)-1], `\"`, `"`))
		}
		return out
	}
	t.Run("past 4,096 characters", func(t *testing.T) {
		r := e.do("POST", appsPath, "application/json", appJSON(`{"name":"long"}`, unknown(20, func(i int) string { return fmt.Sprintf("field%02d", i) + strings.Repeat("x", 243) })))
		require.Equal(t, 201, r.code, "%s", r.body)
		ws := texts(r)
		require.Len(t, ws, 16)
		for i, w := range ws {
			assert.Equal(t, 256, utf8.RuneCountInString(w))
			assert.True(t, strings.HasPrefix(w, fmt.Sprintf(`unknown field "spec.field%02dxxx`, i)), w)
		}
	})
	t.Run("within 4,096 characters", func(t *testing.T) {
		r := e.do("POST", appsPath, "application/json", appJSON(`{"name":"short"}`, unknown(3, func(i int) string { return fmt.Sprint("f", i) })))
		require.Equal(t, 201, r.code, "%s", r.body)
		// Then the Application validator's own.
		assert.Equal(t, []string{`unknown field "spec.f0"`, `unknown field "spec.f1"`, `unknown field "spec.f2"`}, texts(r)[:3])
	})
	t.Run("20,000 unknown fields", func(t *testing.T) {
		r := e.do("POST", appsPath, "application/json", appJSON(`{"name":"many"}`, unknown(20_000, func(i int) string { return fmt.Sprintf("u%06d", i) })))
		require.Equal(t, 201, r.code, "%s", r.body)
		total := 0
		for _, w := range texts(r) {
			total += utf8.RuneCountInString(w)
		}
		assert.Greater(t, total, 4096-256)
		assert.LessOrEqual(t, total, 4096+256)
	})
}
