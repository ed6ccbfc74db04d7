package cache

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/labels"
)

func TestPairs(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 10, 16, 17, 40} {
		t.Run(fmt.Sprint(n, " entries"), func(t *testing.T) {
			m := map[string]any{"not-a-string": 1.5}
			want := map[string]string{}
			for i := range n {
				k, v := fmt.Sprintf("k%02d", (i*7)%n), fmt.Sprint("v", i)
				m[k], want[k] = v, v
			}
			p := pairs(appendPairsOfJSON(nil, m))
			assert.Equal(t, 2*len(want), len(p))
			for k, v := range want {
				got, ok := p.Lookup(k)
				assert.True(t, ok, k)
				assert.Equal(t, v, got)
			}
			assert.False(t, p.Has("not-a-string"))
			assert.False(t, p.Has("zz"))
			if len(want) == 0 {
				assert.Nil(t, p.Map())
			} else {
				assert.Equal(t, want, p.Map())
			}
			var flat pairs // how the selectable fields come: unsorted name, value pairs
			for k, v := range want {
				flat = append(flat, k, v)
			}
			if len(flat) == 0 {
				flat = nil
			}
			flat.sort()
			assert.Equal(t, p, flat, "the same pairs from either source")
			sel, err := labels.Parse("k00")
			assert.NoError(t, err)
			assert.Equal(t, n > 0, sel.Matches(p))
		})
	}
}

// FuzzPairs: an object's labels kept as pairs answer every lookup and every label selector as
// the labels.Set they replace.
func FuzzPairs(f *testing.F) {
	f.Add("app", "web", "tier", "front", "app", "db", "app in (web,db),tier!=back")
	f.Add("a", "", "b/c", "d", "", "x", "!a,b/c=d")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2, k3, v3, selector string) {
		sel, err := labels.Parse(selector)
		if err != nil {
			return
		}
		m := map[string]any{k1: v1, k2: v2, k3: v3}
		set := labels.Set{}
		for k, v := range m {
			set[k] = v.(string)
		}
		p := pairs(appendPairsOfJSON(nil, m))
		assert.Equal(t, sel.Matches(set), sel.Matches(p), "%q on %v", selector, set)
		for _, k := range []string{k1, k2, k3, k1 + "x"} {
			want, wantOK := set[k]
			got, ok := p.Lookup(k)
			assert.Equal(t, wantOK, ok, k)
			assert.Equal(t, want, got, k)
		}
		assert.Equal(t, map[string]string(set), p.Map())
	})
}
