// Package hooks puts the user's own code in opemu's loop, over HTTP (SPEC §15).
//
// Reconcile hooks: a Controller object (controllers.opemu.dev/v1, a built-in CRD) names a
// resource and a hook URL; the Manager runs a reconciler.Controller for it (the queue, backoff,
// retries, leader gate, pause and step of opemu's own controller) whose reconciler POSTs each
// object with its children to the hook and applies the answer: status, children (with owner
// references), events, and a finalizer the hook releases.
//
// Admission webhooks: Admission turns every Validating/MutatingWebhookConfiguration into
// handlers of the write path's admission chain (webhooks.Configured), sending AdmissionReview
// v1 over HTTP(S) with the configuration's rules, selectors, failure policy, timeout and side
// effects.
//
// Non-goals: resolving Services (webhooks are reached by URL), and running anything but HTTP
// calls: the user's code runs in the user's process.
//
// Concurrency: Manager and Admission are safe for concurrent use; their Run and Lead block
// until what they started has stopped.
package hooks
