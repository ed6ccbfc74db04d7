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
	// ResourceVersion is the version of the object the pass read (what it acted on).
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// Wrote is what the pass wrote, in order. Each write's resourceVersion names the watch
	// event that carries it, so a watcher can tell the controller's own writes from others'.
	Wrote []Write `json:"wrote,omitempty"`
	// RequeueAfter is the planned requeue a successful pass asked for (its next rollout step).
	RequeueAfter string `json:"requeueAfter,omitempty"`
}

// Write is one write of a reconcile pass.
type Write struct {
	// What it wrote: "metadata.finalizers" (an update) or "status" (the status subresource).
	What string `json:"what"`
	// ResourceVersion is the version the write produced.
	ResourceVersion string `json:"resourceVersion"`
}

// history keeps the last reconciler.HistoryLimit attempts per object.
type history = reconciler.History[Attempt]
