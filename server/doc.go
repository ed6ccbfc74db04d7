// Package server is opemu's HTTP face: Echo routes, request parsing, the write path (prune and
// default → mutate → validate schema → validate policy → store), the Kubernetes resource API,
// the SSE watch, health and readiness, and every error as a Kubernetes Status.
//
// Handlers are thin: they parse, make one HTTP-free call (write.go, read.go), and return; errors
// become Status in one place (errors.go). Business rules live below: the store owns
// resourceVersion, ordering and watch (cache); schemas are crd's; admission is webhooks'.
// Watches start in the registry (registry.Store.Watch, WatchResources); one loop (watch.go)
// streams them in either protocol (kwatch.go, sse.go).
//
// Concurrency: a Server is safe for concurrent use. Run owns the HTTP server and waits for every
// request, including open watches, before it returns.
package server
