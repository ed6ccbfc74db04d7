// Package crd owns CustomResourceDefinitions: validating them, compiling each version's schema
// once (santhosh-tekuri/jsonschema/v6) with Kubernetes-style structural pruning and defaulting
// and validation into field errors (apimachinery's field.ErrorList), turning each served
// version into a kinds.Kind (printer columns, subresources, selectable fields), and the
// CustomResourceDefinition kind itself, whose Lifecycle registers a CRD's kinds when it is
// stored and unregisters them (dropping their objects) when it is deleted. Built-in CRDs
// (the Application) are served like the others but cannot be replaced or deleted.
//
// Non-goals: storage (cache) and HTTP (server). crd decides whether an object fits its schema;
// callers decide what to do about it.
//
// Concurrency: a Registry is safe for concurrent use. Kinds are immutable once served:
// registering a CRD again makes new Kinds.
package crd
