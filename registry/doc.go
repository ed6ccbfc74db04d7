// Package registry is the write path and the rules of objects, between the HTTP server and
// the store (kube-apiserver's registry and its strategies). One function per verb, read top
// to bottom: check the request against the kind, decode and mutate (PUT body, patch, apply,
// the status or scale view), stamp server-owned metadata, admit (prune, default, mutating
// admission, metadata and schema validation, validating admission), then store. Updates and
// deletes are one cache.Interface.GuaranteedUpdate each: every rule runs inside its try, so a
// race with another writer re-runs the rules on the newer object (the only retry loop).
//
// The rules every kind shares live here: uid, timestamps and generation; name and UID checks;
// finalizers (a delete marks, the last finalizer's removal removes); implicit namespaces, the
// system namespaces and a namespace's Terminating phase (its content is the namespace
// controller's to delete, package namespaces); the status, scale and finalize views; the
// Events a client's write records (SPEC §7). What differs per kind is looked up in its
// kinds.Kind (schema, subresources, create defaults, lifecycle, TTL, limit), never tested by
// name. The one exception is a shortcut behind its own door: create_fast.go stores the
// recorder's Events without the steps they need not take (DESIGN.md, "Shortcuts").
//
// Reads and watches start here too: a read's resourceVersion semantics and paging (read.go),
// and a watch's (watch.go: where it starts, the consistent read before initial events, a
// view's selectors and objects, the 410 of a version that cannot be served); the server only
// frames and times what a Watcher gives.
//
// The server calls Store for HTTP clients; opemu's own components (the controller, the event
// recorder, the lease lock) write through a Client over the same path, so what they store
// passes the same validation as a client's write.
//
// Concurrency: a Store and its Clients are safe for concurrent use. No lock of this package is
// held across a store write except a namespace's stripe (nsLocks), taken shared by creates
// into the namespace and exclusively by its deletion; the store's own lock is always taken
// after it.
package registry
