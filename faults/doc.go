// Package faults makes the API misbehave on purpose (SPEC §16): the built-in Fault kind
// (faults.opemu.dev/v1, cluster-scoped) and the Engine that applies Faults to client requests.
// The engine watches Faults in the store like an informer, matches each request the server
// hands it (verb, group, resource, subresource, namespace, name, User-Agent prefix) against
// the active ones, decides by every, probability, count and expiry, and counts what it
// injected: faults_injected_total at once, status.injected written back soon after, beside
// the request path.
//
// Non-goals: HTTP. The server applies an Injection (a delay, an error Status, a watch that
// ends) in one place before the request reaches the write path, so a fault never changes
// stored state. opemu's own components do not go through HTTP and are never faulted.
//
// Concurrency: Inject is safe for concurrent use and costs one atomic load when no Fault
// exists; Run blocks until its goroutines have exited.
package faults
