package reconciler

import (
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
)

// HistoryLimit is how many reconciles a History keeps per object.
const HistoryLimit = 50

// History keeps the last HistoryLimit attempts per key, as GET .../history shows them; A is a
// reconciler's own record of one attempt. Safe for concurrent use; the zero value is ready.
type History[A any] struct {
	mu    sync.Mutex
	items map[cache.Key][]A
}

// Add records an attempt of key, dropping the oldest past HistoryLimit.
func (h *History[A]) Add(key cache.Key, a A) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.items == nil {
		h.items = map[cache.Key][]A{}
	}
	l := append(h.items[key], a)
	if len(l) > HistoryLimit {
		l = append([]A(nil), l[len(l)-HistoryLimit:]...)
	}
	h.items[key] = l
}

// Get returns a copy of key's attempts, oldest first.
func (h *History[A]) Get(key cache.Key) []A {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]A(nil), h.items[key]...)
}

// Forget drops key's attempts (its object is gone).
func (h *History[A]) Forget(key cache.Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.items, key)
}

// FormatStart is an attempt's start time as histories show it: RFC 3339 in UTC with
// milliseconds, so backoff intervals are visible.
func FormatStart(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
