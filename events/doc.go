// Package events records Events as core/v1 Event objects in the store, so `kubectl get events`,
// `describe` and watches see them, with one extra field, severity (Info, Warning, Error,
// Critical). It aggregates repeats (same involved object, type, reason and source within a
// window update one Event's count), enforces EVENT_LIMIT and EVENT_TTL, and answers the /events
// queries and /events/stats.
//
// Non-goals: deciding when something happened. Callers (the server's write path, the
// controller, the elector) say so.
//
// Events are written through a Client (the in-process API client), so they pass the same
// validation as a client's writes.
//
// Concurrency: a Recorder is safe for concurrent use. Its index is guarded by one mutex that
// is never held across a write; the writes of one aggregate are ordered by that aggregate's
// own lock, so aggregation is exact while unrelated Events are written in parallel. Lock
// order: an aggregate's lock, then the index's.
package events
