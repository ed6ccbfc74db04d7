// Package crd owns CustomResourceDefinitions: the built-in Application CRD, registration of new
// ones at runtime, lookups by group/version/plural, each version's schema compiled once
// (santhosh-tekuri/jsonschema/v6), Kubernetes-style structural pruning and defaulting, validation
// into field errors (apimachinery's field.ErrorList), and printer columns.
//
// Non-goals: storage (cache) and HTTP (server). crd decides whether an object fits its schema;
// callers decide what to do about it.
//
// Concurrency: a Registry is safe for concurrent use; lookups take a read lock only. A *Kind is
// immutable once returned: registering a CRD again makes new Kinds.
package crd
