// Package cache is opemu's storage: the storage contract (Interface, in the shape of
// kube-apiserver's storage.Interface) and its in-memory implementation (Store), which is both
// the source of truth and its own watch cache.
//
// It owns the one store-wide resourceVersion counter, create/get/list/delete and the
// guaranteed-update primitive with preconditions, label and field selection over a small
// index, paging, and Watch with a bounded per-resource history. It knows nothing of what
// objects mean: uid, timestamps, generation, finalizers and namespaces are the rules of the
// layer above (package registry), which reaches the store only through Interface.
//
// Objects are kept as immutable encoded JSON plus a small decoded index (see Object); a write
// encodes once and every watcher shares those bytes. Readers decode when they need structure.
// The index, selectors, shared bytes and fan-out serve readers (the watch cache's role), so a
// store whose truth lives elsewhere (etcd) can feed the same code.
//
// Non-goals: HTTP, JSON schema, admission, object rules, and time (it only stamps versions).
//
// Concurrency: a Store is safe for concurrent use. One mutex orders every write, so events come
// out in resourceVersion order; GuaranteedUpdate runs its UpdateFunc without the lock held;
// writers never block on watchers (a watcher that falls behind is closed with ErrTooSlow).
package cache
