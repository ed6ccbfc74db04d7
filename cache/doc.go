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
// The index, selectors, shared bytes, per-resource history and fan-out are the watch cache
// (watchcache.go) every store shares: Store commits its own writes into it (+1 per write); a
// store whose truth lives elsewhere (package etcd) keeps a WatchCache, the same watch cache fed
// the changes it observes there at the versions they got there (feed.go: Apply, Replace,
// WaitUntil), as kube-apiserver's cacher is. Store's surface is the storage contract alone.
//
// Where a write is hot, the package takes shortcuts held to the general path by fuzz targets:
// objects are encoded and decoded by internal/jsonfast, and a new version is spliced into an
// encoding instead of encoding it again (version_fast.go). docs/DESIGN.md ("Shortcuts") lists
// them.
//
// Non-goals: HTTP, JSON schema, admission, object rules, and time (it only stamps versions).
//
// Concurrency: a Store is safe for concurrent use. One mutex (Store.mu) orders every write, so
// events come out in resourceVersion order; GuaranteedUpdate runs its UpdateFunc without the
// lock held; writers never block on watchers.
//
// Watch fan-out, who runs what:
//   - A writer, under Store.mu, appends its event to the resource's history (bounded by count
//     per resource and by bytes over all resources) and offers it to every watcher in scope
//     (resource and namespace: a comparison). The offer is O(1) and never blocks: a watcher
//     without selectors that has nothing queued takes it straight into its channel if there is
//     room; otherwise it is appended to the watcher's queue. A watcher with more than
//     Config.WatchBuffer events pending is closed with ErrTooSlow.
//   - Each watcher has at most one pump goroutine, started when its queue becomes non-empty
//     and exiting when it is empty again (an idle watcher has none, and no buffer beyond a
//     16-event channel). The pump applies the label and field selectors and selector
//     transitions, and sends in order; it is the only sender while it runs. Selectors are never
//     evaluated under Store.mu, so a costly selector delays its own watcher only. Stop waits
//     for the pump.
//   - Watch registers the watcher and reads the snapshot or history under Store.mu, then
//     filters and sorts those initial events outside it; live events that arrive meanwhile wait
//     in the queue behind them. The initial events are in the channel when Watch returns.
//   - List collects candidates under a read lock and applies selectors after releasing it.
//
// Lock order: Store.mu before a Watcher's mu. A pump takes only its Watcher's mu, and never
// while sending. Nothing blocks while holding either lock.
package cache
