package yamlsize_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/opemu/opemu/internal/yamlsize"
)

// aliases is a mapping of n aliases of one scalar of size bytes.
func aliases(n, size int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "data:\n  a0: &big %q\n", strings.Repeat("x", size))
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "  a%d: *big\n", i)
	}
	return b.String()
}

func TestMeasure(t *testing.T) {
	for _, tc := range []struct {
		name  string
		doc   string
		limit int
		over  bool
	}{
		{"no aliases: not measured", "a: &x 1\nb: [1, 2]\n", 10, false},
		{"aliases within the limit", aliases(3, 100), 1000, false},
		{"500 aliases of a 2 MB scalar", aliases(500, 2<<20), 6 << 20, true},
		{"a mapping aliased in a merge key", "base: &b {k: " + strings.Repeat("v", 1000) + "}\n" + strings.Repeat("- <<: *b\n", 0) + "x:\n  <<: *b\ny:\n  <<: *b\n", 2500, true},
		{"nested aliases that double", "a: &a [" + strings.Repeat("x", 100) + "]\nb: &b [*a, *a]\nc: &c [*b, *b]\nd: &d [*c, *c]\ne: [*d, *d]\n", 2000, true},
		{"a YAML the library refuses: left to the decoder", "a: &a [*a, *a]\n", 1, false},
		{"an unknown alias: left to the decoder", "a: *nothing &x\n", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, over := yamlsize.Measure([]byte(tc.doc), tc.limit)
			assert.Equal(t, tc.over, over)
		})
	}
}

// TestMeasureIsAtMostTheJSON: what Measure counts is never more than the JSON sigs.k8s.io/yaml
// converts the document to, and for these documents within a few bytes of it.
func TestMeasureIsAtMostTheJSON(t *testing.T) {
	for _, doc := range []string{
		aliases(5, 1000),
		"a: &a {x: 1, y: [true, null, 2.5, \"s\"]}\nb: *a\nc: [*a, *a]\n1: *a\n",
	} {
		js, err := yaml.YAMLToJSON([]byte(doc))
		require.NoError(t, err)
		size, over := yamlsize.Measure([]byte(doc), 1<<20)
		require.False(t, over)
		assert.LessOrEqual(t, size, len(js)+1, "%s", js)
		assert.Greater(t, size, len(js)*9/10, "%s", js)
	}
}

// FuzzMeasure: Measure never counts more than the JSON the document converts to (plus the one
// comma it counts after the last value), and reports over exactly when that count passes the limit.
func FuzzMeasure(f *testing.F) {
	f.Add("a: &a [x, y]\nb: [*a, *a]\n", 20)
	f.Add("a: &a {k: v}\nb:\n  <<: *a\n", 5)
	f.Add(aliases(4, 10), 50)
	f.Fuzz(func(t *testing.T, doc string, limit int) {
		if limit < 0 || len(doc) > 4096 {
			return
		}
		size, over := yamlsize.Measure([]byte(doc), limit)
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return
		}
		if over {
			require.Greater(t, len(js)+1, limit, "refused a document whose JSON fits: %s", js)
			return
		}
		require.LessOrEqual(t, size, limit)
		require.LessOrEqual(t, size, len(js)+1, "%s", js)
	})
}
