// Package crd owns CustomResourceDefinitions, with k8s.io/apiextensions-apiserver's own code
// doing what kube-apiserver does with it: validating CRDs (define.go), compiling each version's
// schema once into structural pruning, defaulting and validation of custom resources, CEL rules
// (x-kubernetes-validations) included, into field errors (schema.go), turning each served
// version into a kinds.Kind (printer columns, subresources, selectable fields), and the
// CustomResourceDefinition kind itself, whose Lifecycle registers a CRD's kinds when it is
// stored and, when it is deleted, deletes its custom resources before it goes (delete.go).
// Built-in CRDs (the Application) are served like the others but cannot be replaced or deleted.
//
// Non-goals: storage (cache) and HTTP (server). crd decides whether an object fits its schema;
// callers decide what to do about it.
//
// Concurrency: a Registry is safe for concurrent use. Kinds are immutable once served:
// registering a CRD again makes new Kinds. A deleted CRD's clean-up runs in the writes that
// trigger it (no goroutine of its own).
package crd
