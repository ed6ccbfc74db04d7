package registry

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Namespace lifecycle (SPEC §2), as kube-apiserver's namespace storage and its
// NamespaceLifecycle admission have it: a DELETE marks a namespace Terminating
// (deletionTimestamp, phase Terminating, the garbage collector's finalizer of the propagation
// policy) and answers it; the namespace controller (package namespaces) deletes what is in it,
// then removes the kubernetes finalizer from spec.finalizers through /finalize, and that
// update removes the namespace (stampUpdate); a DELETE once spec.finalizers is empty deletes it
// as any object. Creates into a Terminating namespace get 403; default, kube-system and
// kube-public cannot be deleted. A create into a namespace that does not exist is a 404
// (namespaces "x" not found); the system namespaces exist from the start (Bootstrap).

// DefaultNamespace exists from the start and cannot be deleted.
const DefaultNamespace = "default"

// SystemNamespaces are the namespaces kube-apiserver creates at start, which Bootstrap
// creates: default, kube-system, kube-public and kube-node-lease (the Nodes' Leases).
var SystemNamespaces = []string{DefaultNamespace, "kube-system", "kube-public", "kube-node-lease"}

// immortal reports whether the namespace name may not be deleted (kube-apiserver's
// NamespaceLifecycle admission keeps default, kube-system and kube-public).
func immortal(name string) bool {
	return name == DefaultNamespace || name == "kube-system" || name == "kube-public"
}

// lockNamespace takes the namespace's stripe, exclusively or shared, and returns its unlock.
func (s *Store) lockNamespace(ns string, exclusive bool) func() {
	l := &s.nsLocks[maphash.String(s.nsSeed, ns)%uint64(len(s.nsLocks))]
	if exclusive {
		l.Lock()
		return l.Unlock
	}
	l.RLock()
	return l.RUnlock
}

func namespaceKey(name string) cache.Key {
	return cache.Key{Group: kinds.Namespaces.Group, Resource: kinds.Namespaces.Resource, Name: name}
}

// admitIntoNamespace is kube-apiserver's NamespaceLifecycle admission of a create of name (or
// the generateName it was sent with) at key: a namespace that does not exist is a 404 on it,
// a Terminating one a 403, dry run or not. A namespace missing from this replica's reads is
// looked up again after a consistent read, as kube-apiserver looks up live one its informer
// lacks, so that a namespace just created through another replica is found. Create calls it
// before validation, as kube-apiserver's admission runs, and again holding the namespace's
// stripe shared (inNamespace), where no deletion can slip in before the store.
func (s *Store) admitIntoNamespace(ctx context.Context, key cache.Key, name string) error {
	ns, err := s.cfg.Storage.Get(ctx, namespaceKey(key.Namespace))
	if errors.Is(err, cache.ErrNotFound) {
		if err := s.cfg.Storage.WaitUntilFresh(ctx, 0); err != nil {
			return err
		}
		ns, err = s.cfg.Storage.Get(ctx, namespaceKey(key.Namespace))
	}
	switch {
	case errors.Is(err, cache.ErrNotFound):
		return apierrors.NewNotFound(schema.GroupResource(kinds.Namespaces), key.Namespace)
	case err != nil:
		return err
	case !ns.Deleting():
		return nil
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: key.Group, Resource: key.Resource}, name,
		fmt.Errorf("unable to create new content in namespace %s because it is being terminated", key.Namespace))
	forbidden.ErrStatus.Details.Causes = append(forbidden.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: corev1.NamespaceTerminatingCause, Message: fmt.Sprintf("namespace %s is being terminated", key.Namespace), Field: "metadata.namespace",
	})
	return forbidden
}

// deleteNamespace is kube-apiserver's namespace DELETE: the first marks the namespace
// Terminating and answers it, with the garbage collector's finalizer the propagation policy
// asks for; while spec.finalizers is not empty a DELETE answers it unchanged; after that it is
// deleted as any object (removed, or marked while metadata.finalizers hold it). Its content is
// the namespace controller's to delete (package namespaces). It holds the namespace's stripe
// exclusively while it marks, so no create slips in behind a Terminating namespace.
func (s *Store) deleteNamespace(ctx context.Context, t Target, pre cache.Preconditions, o Options) (*cache.Object, bool, error) {
	name := t.Key.Name
	if immortal(name) {
		return nil, false, apierrors.NewForbidden(t.GroupResource(), name, errors.New("this namespace may not be deleted"))
	}
	unlock := s.lockNamespace(name, true)
	final := false
	obj, err := s.cfg.Storage.GuaranteedUpdate(ctx, t.Key, cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
		if err := namespacePreconditions(t, cur, pre); err != nil {
			return cache.Update{}, err
		}
		obj, err := cur.Decode()
		if err != nil {
			return cache.Update{}, err
		}
		if cur.Deleting() {
			final = len(specFinalizers(obj)) == 0
			return cache.Update{}, nil
		}
		final = false
		md := metadataOf(obj)
		md["deletionTimestamp"] = s.now()
		st, ok := obj["status"].(map[string]any)
		if !ok {
			st = map[string]any{}
			obj["status"] = st
		}
		st["phase"] = string(corev1.NamespaceTerminating)
		if finalizers, changed := gcFinalizers(cur.Finalizers(), o.PropagationPolicy, t.Kind.DeletePropagation); changed {
			md["finalizers"] = toAnySlice(finalizers)
		}
		return cache.Update{Object: obj}, nil
	}, storeOptions(t.Kind, o))
	unlock()
	if err != nil || !final {
		return obj, false, err
	}
	return s.deleteObject(ctx, t, pre, o)
}

// namespacePreconditions checks a namespace DELETE's preconditions as kube-apiserver's
// namespace storage words their failure.
func namespacePreconditions(t Target, cur *cache.Object, pre cache.Preconditions) error {
	var msg string
	switch {
	case pre.UID != "" && pre.UID != cur.UID():
		msg = fmt.Sprintf("Precondition failed: UID in precondition: %s, UID in object meta: %s", pre.UID, cur.UID())
	case pre.ResourceVersion != "" && pre.ResourceVersion != formatRV(cur.ResourceVersion()):
		msg = fmt.Sprintf("Precondition failed: ResourceVersion in precondition: %s, ResourceVersion in object meta: %d", pre.ResourceVersion, cur.ResourceVersion())
	default:
		return nil
	}
	return apierrors.NewConflict(t.GroupResource(), t.Key.Name, errors.New(msg))
}
