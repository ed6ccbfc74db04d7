// Package gc is the garbage collector of ownerReferences (SPEC §14), as Kubernetes' garbage
// collector controller does it: an object whose every owner is gone is deleted (Background);
// an owner deleted with propagationPolicy Foreground (the foregroundDeletion finalizer) goes
// after its blockOwnerDeletion dependents are gone; one deleted with Orphan (the orphan
// finalizer) loses its references from its dependents, which stay; a reference to a namespaced
// owner in another namespace counts as absent, and one from a cluster-scoped object to a
// namespaced kind is ignored, both reported with a Warning Event (OwnerRefInvalidNamespace).
//
// The Collector watches every resource like an informer and keeps a graph of owners and
// dependents by uid, holding only objects that have ownerReferences, the uids they name, and
// objects waiting on the collector (a garbage-collection finalizer); every other object costs
// nothing. Decisions are made on the live objects it reads through its Client, and every write
// (deletes with preconditions, updates of ownerReferences and finalizers) goes through it, so
// the write path's rules apply. It does not decide who deletes an owner (the propagation
// policy's finalizers are set by the write path, package registry) and it never runs while
// not leading: Run is leadership work, and each Run starts from a full list.
//
// A Collector is safe for concurrent use; Run may be called again after it returns.
package gc
