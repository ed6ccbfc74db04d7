package cache

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHistoryRing(t *testing.T) {
	t.Parallel()
	var h history
	h.init(3, 100)
	after := func(rv uint64) []uint64 {
		var out []uint64
		h.after(rv, func(ev Event) { out = append(out, ev.ResourceVersion) })
		return out
	}
	assert.Empty(t, after(100))
	for rv := uint64(101); rv <= 107; rv++ {
		h.add(Event{ResourceVersion: rv})
	}
	assert.Equal(t, uint64(104), h.since, "events up to 104 were evicted")
	assert.Equal(t, []uint64{105, 106, 107}, after(104))
	assert.Equal(t, []uint64{106, 107}, after(105))
	assert.Empty(t, after(107))
}

// TestHistoryRingWraps: events taken and dropped in any interleaving (the count bound, the
// bytes bound's evictOldest, growth while filling) come back oldest first, every one newer than
// since, through many wraps of the ring.
func TestHistoryRingWraps(t *testing.T) {
	t.Parallel()
	for _, max := range []int{1, 2, 17, 40} {
		var h history
		h.init(max, 0)
		var want []uint64
		rv := uint64(0)
		for step := range 300 {
			rv++
			h.add(Event{ResourceVersion: rv})
			want = append(want, rv)
			if len(want) > max {
				want = want[1:]
			}
			if step%7 == 3 && len(want) > 0 { // the bytes bound takes one more
				h.evictOldest()
				want = want[1:]
			}
			var got []uint64
			h.after(h.since, func(ev Event) { got = append(got, ev.ResourceVersion) })
			if len(want) == 0 {
				assert.Empty(t, got)
			} else if !assert.Equal(t, want, got, "max %d step %d", max, step) {
				return
			}
			assert.LessOrEqual(t, len(h.ring), max)
		}
	}
}
