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
