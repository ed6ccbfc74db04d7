package jsontree_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/opemu/opemu/internal/jsontree"
)

func TestRewrite(t *testing.T) {
	double := func(v any) (any, bool) {
		if n, ok := v.(int); ok {
			return 2 * n, true
		}
		return v, false
	}
	t.Run("copies only the way to a changed leaf", func(t *testing.T) {
		kept := map[string]any{"s": "x"}
		in := map[string]any{"a": []any{"y", 1}, "kept": kept}
		out, changed := jsontree.Rewrite(in, double)
		assert.True(t, changed)
		assert.Equal(t, map[string]any{"a": []any{"y", 2}, "kept": kept}, out)
		assert.Equal(t, []any{"y", 1}, in["a"], "the input is not written")
		outKept := out.(map[string]any)["kept"].(map[string]any)
		outKept["s"] = "shared"
		assert.Equal(t, "shared", kept["s"], "an unchanged object is shared, not copied")
	})
	t.Run("nothing to change", func(t *testing.T) {
		in := map[string]any{"a": []any{"y"}}
		out, changed := jsontree.Rewrite(in, double)
		assert.False(t, changed)
		out.(map[string]any)["b"] = true
		assert.Contains(t, in, "b", "the input itself comes back")
	})
	t.Run("a leaf alone", func(t *testing.T) {
		out, changed := jsontree.Rewrite(3, double)
		assert.True(t, changed)
		assert.Equal(t, 6, out)
	})
}
