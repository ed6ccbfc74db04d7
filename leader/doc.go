// Package leader elects one leader among opemu processes with client-go's leaderelection
// elector (not a reimplementation), over two resourcelock.Interface backends: FileLock (a
// record shared by the processes of one machine, read-modify-written under an exclusive flock
// and replaced atomically) and MemoryLock (a coordination/v1 Lease in this process's store).
//
// Non-goals: starting or stopping controllers itself. Elector calls OnStartedLeading and waits
// for it to return; main wires it to the reconciler.
//
// Concurrency: an Elector is safe for concurrent use; Run blocks until leadership work has
// stopped and the lease is released.
package leader
