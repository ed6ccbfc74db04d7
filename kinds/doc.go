// Package kinds is the one registry of the resource types opemu serves: for each group, version
// and resource, a Kind says its names and scope and which optional capabilities it has (a
// schema, the status and scale subresources, Table columns, the Go type strategic merge patches
// follow, selectable fields, protobuf bodies, and rules of its own on the write path). Built-in
// kinds (Namespace, Event, Lease) are defined here; CustomResourceDefinitions fill the registry
// through package crd. Everything else (the write path, discovery, OpenAPI, Tables, watches)
// looks kinds up here instead of keeping tables of its own.
//
// Non-goals: storing objects (cache), HTTP (server), and the rules every kind shares (registry).
//
// Concurrency: a Registry is safe for concurrent use; lookups take a read lock. A *Kind is
// immutable once added: registering a definition again adds new Kinds.
package kinds
