// Package cache is opemu's in-memory store: the emulator's etcd plus its watch cache.
//
// It owns the objects, the one store-wide resourceVersion counter, create/get/list/update/delete
// with preconditions, generation and finalizer rules, implicit namespaces, label and field
// selection, and Watch with a bounded per-resource history.
//
// Objects are kept as immutable encoded JSON plus a small decoded index (see Object); a write
// encodes once and every watcher shares those bytes. Readers decode when they need structure.
//
// Non-goals: HTTP, JSON schema, admission, and any time-based behaviour other than stamping
// timestamps. Those live in server, crd, webhooks and reconciler.
//
// Concurrency: a Store is safe for concurrent use. One mutex orders every write, so events come
// out in resourceVersion order; writers never block on watchers (a watcher that falls behind is
// closed with ErrTooSlow).
package cache
