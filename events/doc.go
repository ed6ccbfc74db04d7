// Package events records Events as core/v1 Event objects in the store, so `kubectl get events`,
// `describe` and watches see them, with one extra field, severity (Info, Warning, Error,
// Critical). It aggregates repeats (same involved object, type, reason and source within a
// window update one Event's count), enforces EVENT_LIMIT and EVENT_TTL, and answers the /events
// queries and /events/stats.
//
// Non-goals: deciding when something happened. Callers (the server's write path, the
// controller, the elector) say so.
//
// Concurrency: a Recorder is safe for concurrent use. Record serialises on one mutex so that
// aggregation is exact; it never blocks on anything but the store.
package events
