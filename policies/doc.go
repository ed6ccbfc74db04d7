// Package policies runs the admission policies in CEL as kube-apiserver runs them:
// ValidatingAdmissionPolicies and MutatingAdmissionPolicies (admissionregistration.k8s.io/v1)
// with their bindings, read from the store, as handlers of the write path's admission chain
// (webhooks.Configured). It is k8s.io/apiserver's policy code that decides: the matching
// (matchConstraints, the binding's matchResources, namespace and object selectors), the
// parameters (generic.CollectParams: paramRef by name or selector, parameterNotFoundAction),
// the CEL compilation and evaluation (matchConditions, variables, validations with message and
// messageExpression, auditAnnotations, mutations by JSON patch or apply configuration), the
// validation actions (Deny, Warn, Audit), the failure policy and the words of a denial. What
// this package adds is what kube-apiserver's plugin framework (informers, a client-go
// clientset) would: the objects from the store, the namespace and parameter objects read from
// the store on each request, and the request as admission.Attributes.
//
// Order (kube-apiserver's plugin order): MutatingAdmissionPolicy before
// MutatingAdmissionWebhook, ValidatingAdmissionPolicy before ValidatingAdmissionWebhook, all
// after opemu's built-in handlers (kube's built-in plugins). Compose with Both.
//
// The type-checking controller (status.go) writes a ValidatingAdmissionPolicy's
// status.typeChecking as kube-controller-manager's does, with apiserver's TypeChecker.
//
// Audit: the audit annotations a policy makes (auditAnnotations, validationActions Audit) go to
// the request's call (calls.AddAnnotations), whose audit log Event carries them as
// kube-apiserver's does.
//
// Concurrency: Policies is safe for concurrent use; Run blocks until its watch has stopped.
package policies
