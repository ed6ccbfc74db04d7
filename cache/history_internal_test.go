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
