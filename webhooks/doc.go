// Package webhooks is opemu's admission framework: mutating then validating handlers with the
// requests each matches, the Chain that runs them, and the AdmissionReview v1 encoding served
// at /mutate and /validate. The handlers themselves belong to their kinds (the Application's
// are in package application). Its shape follows
// controller-runtime's pkg/webhook/admission: Handler, HandlerFunc, Request, Response.
//
// Non-goals: storage. Webhooks decide; the caller writes.
//
// Concurrency: handlers and chains are safe for concurrent use; they keep no per-request state.
package webhooks
