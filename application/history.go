package application

import "github.com/opemu/opemu/reconciler"

// Attempt is one reconcile of one object, as GET .../history shows it.
type Attempt struct {
	Generation int64  `json:"generation"`
	Success    bool   `json:"success"`
	Phase      string `json:"phase"`
	Message    string `json:"message"`
	// StartTime is RFC 3339 with milliseconds, so backoff intervals are visible.
	StartTime string `json:"startTime"`
	Duration  string `json:"duration"`
}

// history keeps the last reconciler.HistoryLimit attempts per object.
type history = reconciler.History[Attempt]
