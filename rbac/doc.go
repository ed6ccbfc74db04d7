// Package rbac decides requests as kube-apiserver's RBAC authorizer does (--authorization-mode=RBAC):
// Roles, ClusterRoles (aggregation included), RoleBindings and ClusterRoleBindings read from the
// store, matched with kube's rule semantics (rules.go); the bootstrap policy a cluster starts with,
// recorded from kube-apiserver v1.37.2 (bootstrap.go); and the escalation checks on writes of
// Roles and bindings (escalation.go), with component-helpers' Covers.
//
// It decides; it does not authenticate and answers no HTTP. The server asks Authorizer.Authorize
// for every request when RBAC is on, and RulesFor for SelfSubjectRulesReview.
//
// Concurrency: an Authorizer is safe for concurrent use; it reads the store on every decision (its
// decoded objects are cached by resourceVersion), so a write of a Role is in force for the next
// request.
package rbac
