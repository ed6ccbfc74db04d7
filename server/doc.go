// Package server is opemu's HTTP face: Echo routes (routes.go), the middleware every request
// meets (request metrics, the request guard, limits and deadlines, faults: server.go, guard.go,
// auth.go, faults.go), request parsing (request.go, query.go, read.go), the Kubernetes resource
// API (objects.go), watches in two protocols (SSE in watch.go, Kubernetes' ?watch=true in
// kwatch.go), discovery, OpenAPI, Tables, health, readiness, the operator's and the loop's
// routes, the dashboard, and every error as a Kubernetes Status (errors.go, the only place).
//
// Handlers are thin: they parse, make one HTTP-free call and answer. Reads and writes go to
// registry (Store.Create, Update, Patch, Delete, Get, List: the write path, admission and the
// rules of objects live there); watches start there too (registry.Store.Watch, WatchResources)
// and one loop (watch.go) streams them in either protocol (kwatch.go, sse.go). What a kind is
// comes from kinds (and crd for custom kinds); the store (cache) owns resourceVersion, ordering
// and fan-out.
//
// Concurrency: a Server is safe for concurrent use. Run owns the HTTP server and waits for every
// request, including open watches, before it returns.
package server
