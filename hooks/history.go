package hooks

import "github.com/opemu/opemu/reconciler"

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

// history keeps the last reconciler.HistoryLimit attempts per object.
type history = reconciler.History[Attempt]
