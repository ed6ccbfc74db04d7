// Package kinds is the one registry of the resource types opemu serves: for each group, version
// and resource, a Kind says its names and scope and which optional capabilities it has (a
// schema, the status and scale subresources, Table columns, the Go type strategic merge patches
// follow, selectable fields, protobuf bodies, server-side apply's types, a view of another
// kind's objects, and rules of its own on the write path). Built-in kinds are defined here:
// Namespace, Event and Lease by hand (builtin.go), the kinds operators use (SPEC §14) one line
// each from their Go types in client-go's scheme (served.go, typed.go), events.k8s.io/v1 Event
// as a view of v1 Events (eventsview.go). CustomResourceDefinitions fill the registry through
// package crd. Everything else (the write path, discovery, OpenAPI, Tables, watches) looks
// kinds up here instead of keeping tables of its own.
//
// Non-goals: storing objects (cache), HTTP (server), and the rules every kind shares (registry).
//
// Concurrency: a Registry is safe for concurrent use; lookups take a read lock. A *Kind is
// immutable once added: registering a definition again adds new Kinds. The lazily built parts
// of typed kinds (their Go type's description, OpenAPI definitions, client-go's
// structured-merge-diff schema) are built once, under their own locks, and shared by the
// Registry's kinds.
package kinds
