// Package reconciler runs the operator pattern inside opemu: a client-go work queue (a key
// queued at most once, one worker per key, failures requeued with the larger of a per-key
// exponential backoff and a token bucket, dropped after MaxRetries), a Controller that lists
// and watches the store like an informer and enqueues only on changes that matter, periodic
// resync, and the Application reconciler with its simulated rollout, finalizer, conditions,
// failure simulation and per-object history.
//
// Non-goals: HTTP, and leader election. The controller sees the world only through cache; who
// leads is decided outside (main runs Controller.Run while this process leads).
//
// Concurrency: Controller and Application are safe for concurrent use; Run blocks until its
// workers have finished their current item and exited.
package reconciler
