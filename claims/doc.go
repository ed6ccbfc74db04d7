// Package claims is kube-controller-manager's pvc-protection controller (SPEC §14): a
// PersistentVolumeClaim gets kube-apiserver's kubernetes.io/pvc-protection finalizer when it is
// created (kinds.PVCProtectionFinalizer, the StorageObjectInUseProtection admission), so a
// deleted claim stays while a pod that has not finished uses it; this controller removes the
// finalizer once none does, and the claim goes.
//
// The Controller is a reconciler.Controller over claims (a claim marked for deletion is
// enqueued by its MODIFIED event), plus one watch of pods: a pod that goes or finishes enqueues
// the claims it named. Only the leader runs it, beside the garbage collector (app); with
// ENABLE_CONTROLLER=false a deleted claim keeps its finalizer, as under a lone kube-apiserver.
package claims
