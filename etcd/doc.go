// Package etcd is cache.Interface over etcd (SPEC §12): replicas that share one truth. Each
// replica keeps a cache.WatchCache filled by one list of its key prefix and kept current by one
// etcd watch, the design of kube-apiserver's cacher; reads, lists and watches are served from
// it, writes go to etcd.
//
// Who assigns versions: etcd. An object's resourceVersion is the revision of the transaction
// that wrote it (its mod_revision), a list's is the revision the cache had reached, a DELETED
// event's is the revision of the removal. Every replica therefore gives an object the same
// version, and a client may list on one replica and watch or resume on another. The value
// stored in etcd is the object's JSON without resourceVersion; every replica inserts it at the
// same place (cache.WatchCache.Stored), so all hold the same bytes. Each write is its own
// transaction, so each has a version of its own, except concurrent creates that carry a TTL
// (Events): group commit (batch.go; Config.SingleWrites turns it off) writes them in one
// transaction, and they share its version, as the deletions of one expired lease do. A watch
// resuming at a shared version gets every change of it again (cache.WatchOptions).
//
// How a write is made: one transaction guarded by the key's mod_revision (create: the key must
// not exist), in the shapes kube-apiserver's etcd3 store issues (see write.go), so kine works
// as the endpoint too. GuaranteedUpdate decides on the cached state first and on etcd's own
// when that one fails a check or a comparison. Objects written with a TTL (Events) carry an
// etcd lease.
//
// When a write is visible: a write returns once this replica's cache holds its revision, so
// this replica's reads see it at once. Another replica sees it after a consistent read:
// WaitUntilFresh asks etcd for its current revision and waits until the cache has reached it
// (writing the progress key when etcd moved for writes outside the prefix), or fails with a
// 504 after FreshTimeout. Reads without it (resourceVersion "0") see the cache as it is.
//
// What a watcher is promised: every change after its starting version that matches, exactly
// once, in revision order, as the cache received them from etcd; resuming works on any replica
// while the version is in that replica's history. When the feed's etcd watch breaks it
// resumes where it stopped; when etcd compacted past it, the cache lists again and every
// watcher is closed with ErrGone (a 410: list again). Nothing is skipped silently.
//
// etcd unreachable: every call is bounded (RequestTimeout, and less than the caller's deadline)
// and fails as ErrTimeout or ErrUnavailable, naming etcd; a value etcd refuses as too large is
// ErrTooLarge. The feed retries by itself; nothing needs a restart.
//
// Non-goals: the rules of objects (package registry), leader election, compaction scheduling
// (Compactor is run by the leader).
//
// Concurrency: a Store is safe for concurrent use. One goroutine, the feed, applies etcd's
// events; Close stops it.
package etcd
