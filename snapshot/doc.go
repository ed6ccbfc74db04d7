// Package snapshot saves and restores a whole cluster's state (SPEC §23): a teacher's demo
// reset to the moment before the failure, a test suite's fixture given to every test, the state
// a bug report carries.
//
// A Snapshot is the objects of a store at one version and the server's clock. Take reads them
// from a store in one consistent step (a watch-list: every object at one version); Write makes
// them a YAML stream that kubectl apply also accepts (CRDs first, then namespaces, then the rest
// with owners before dependents; no resourceVersion, and each uid in the annotation
// snapshot.opemu.dev/uid, since kube-apiserver refuses an apply that changes the uid of an
// object it has); Read takes such a stream (or any YAML or JSON stream of objects, as
// kubectl apply -f does) back. Objects decides what a store restores: a taken snapshot's
// objects as they are, a read one's checked as the write path checks an object (its kind
// served, or defined by a CRD in the snapshot; its metadata and schema) with its uid, times
// and status kept. cache.Interface.Restore then replaces the store's content in one step
// (package app wires the rest: the served CRDs, the Events' index, the clock).
//
// Non-goals: merging a snapshot into a running state (a restore replaces everything; kubectl
// apply merges), and etcd's own snapshots (an operator's tool).
//
// Concurrency: a Snapshot is immutable once taken or read, and safe to restore many times
// from several goroutines (its objects are shared, immutable bytes).
package snapshot
