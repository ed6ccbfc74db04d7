// Package events records Events as core/v1 Event objects in the store, so `kubectl get events`,
// `describe` and watches see them, with one extra field, severity (Info, Warning, Error,
// Critical). It aggregates repeats (same involved object, type, reason and source within a
// window update one Event's count) and answers the /events queries and /events/stats.
//
// It also holds the rules of the Event kind (Kind): its TTL (EVENT_TTL: an etcd lease on etcd,
// Recorder.Run's expiry over the in-memory store) and, over the in-memory store, its limit
// (EVENT_LIMIT: the write path asks the kind's kinds.Limit for room before every Event it
// stores, whoever writes it, and the oldest lastTimestamp goes).
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
// order: an aggregate's lock, then the index's. The Event kind's limit has a mutex of its own,
// never held across a write either.
package events
