package hooks

import (
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
)

// historyLimit is how many reconciles are kept per object.
const historyLimit = 50

// Attempt is one reconcile of one object by a hook, as GET .../history shows it (the fields of
// the Application controller's attempts, and which controller called which attempt).
type Attempt struct {
	Controller string `json:"controller"`
	Generation int64  `json:"generation"`
	Success    bool   `json:"success"`
	// Attempt is the number the hook was sent: 1, or 1 + the failures since the last success.
	Attempt int    `json:"attempt"`
	Phase   string `json:"phase"`
	Message string `json:"message"`
	// StartTime is RFC 3339 with milliseconds, so backoff intervals are visible.
	StartTime string `json:"startTime"`
	Duration  string `json:"duration"`
}

// history keeps the last historyLimit attempts per key.
type history struct {
	mu    sync.Mutex
	items map[cache.Key][]Attempt
}

func (h *history) add(key cache.Key, a Attempt) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.items == nil {
		h.items = map[cache.Key][]Attempt{}
	}
	l := append(h.items[key], a)
	if len(l) > historyLimit {
		l = append([]Attempt(nil), l[len(l)-historyLimit:]...)
	}
	h.items[key] = l
}

func (h *history) get(key cache.Key) []Attempt {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]Attempt(nil), h.items[key]...)
}

func (h *history) forget(key cache.Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.items, key)
}

func formatStart(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z07:00") }
