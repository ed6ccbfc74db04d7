package reconciler_test

import (
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	"github.com/stretchr/testify/assert"
)

// TestHistory: the last HistoryLimit attempts per key, oldest first; Get returns a copy;
// Forget drops a key's attempts and no other's.
func TestHistory(t *testing.T) {
	t.Parallel()
	var h reconciler.History[int]
	a, b := cache.Key{Name: "a"}, cache.Key{Name: "b"}
	for i := range reconciler.HistoryLimit + 5 {
		h.Add(a, i)
	}
	h.Add(b, -1)
	got := h.Get(a)
	assert.Len(t, got, reconciler.HistoryLimit)
	assert.Equal(t, 5, got[0], "the oldest are dropped")
	assert.Equal(t, reconciler.HistoryLimit+4, got[len(got)-1])
	got[0] = 99
	assert.Equal(t, 5, h.Get(a)[0], "Get returns a copy")
	h.Forget(a)
	assert.Empty(t, h.Get(a))
	assert.Equal(t, []int{-1}, h.Get(b))
	assert.Equal(t, "2026-11-24T06:00:01.250Z", reconciler.FormatStart(time.Date(2026, 11, 24, 7, 0, 1, 250e6, time.FixedZone("CET", 3600))))
}
