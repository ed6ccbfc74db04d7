// Package application is opemu's built-in example of the operator pattern: the Application
// custom resource (cloudnative.elide.dev/v1), its admission (a defaulter, a validator and an
// image security policy, run in-process on every write and served at /mutate and /validate),
// and its reconciler (finalizer, a simulated rollout paced by ROLLOUT_STEP, phases and
// conditions, simulated failures, cleanup on deletion, per-object reconcile history).
//
// It is a user of the framework packages, not part of them: crd, webhooks and reconciler know
// nothing of Applications; app wires this package in.
//
// Concurrency: the reconciler and the admission handlers are safe for concurrent use.
package application
