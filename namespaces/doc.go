// Package namespaces is the namespace controller (kube-controller-manager's, SPEC §2): it
// finishes the deletion of Terminating namespaces. The write path (package registry) only
// marks a deleted namespace Terminating and refuses new content in it, as kube-apiserver does;
// this controller then deletes everything in it (Pods first, then every other resource, with
// propagationPolicy Background, honouring finalizers), reports what is left in the namespace's
// conditions (NamespaceContentRemaining, NamespaceFinalizersRemaining, ... with kube's reasons
// and messages), and once nothing is left removes the kubernetes finalizer through
// namespaces/finalize, which removes the namespace unless other finalizers hold it.
//
// The Controller is a reconciler.Controller over namespaces (enqueued when one is marked),
// plus, for each namespace whose content is held by finalizers, a watch of that namespace
// alone: any change there (the last finalizer going) looks at the namespace again at once,
// where kube's controller polls. Replicas sharing etcd see each other's writes through their
// watch caches, so only the leader needs to run it. It runs as leadership work beside the
// garbage collector (app), and never while not leading.
package namespaces
