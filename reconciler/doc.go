// Package reconciler is the operator machinery every controller inside opemu runs on: a
// Controller that lists and watches one resource like an informer (one watch with initial
// events, re-listed when it falls behind) and enqueues a key only on changes that matter
// (generation, labels, annotations, finalizers, deletion; not status), periodic resync, and a
// client-go work queue (a key queued at most once, one worker per key, failures requeued with
// the larger of a per-key exponential backoff and a token bucket and dropped after MaxRetries,
// conflicts requeued at once). A Reconciler (reconciler.go) brings one key toward its desired
// state; Tuning is the settings a server gives all its controllers. Pause, Step and Resume
// (pause.go) hold the workers; History (history.go) keeps the last attempts per object.
//
// Non-goals: any kind's rules (the Application's reconciler is package application's, the
// simulated workloads' package workloads', the Controllers' hooks'), HTTP, and leader election:
// who leads is decided outside (package app runs Controller.Run while this process leads).
//
// Concurrency: a Controller is safe for concurrent use; Run blocks until its informer and
// workers have exited, each worker after finishing its current item.
package reconciler
