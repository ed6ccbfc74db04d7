// Package webhooks is opemu's admission: mutating then validating handlers (the Application
// defaulter, validator and image security policy), the Chain that runs them, and the
// AdmissionReview v1 encoding served at /mutate and /validate. Its shape follows
// controller-runtime's pkg/webhook/admission: Handler, HandlerFunc, Request, Response.
//
// Non-goals: storage. Webhooks decide; the caller writes.
//
// Concurrency: handlers and chains are safe for concurrent use; they keep no per-request state.
package webhooks
