package gc

import (
	"context"
	"errors"
	"fmt"
	"github.com/opemu/opemu/registry"
	"slices"
	"strconv"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// errKindNotServed is an owner reference naming a kind that is not served (yet): the dependent
// is looked at again with backoff.
var errKindNotServed = errors.New("kind not served")

// ownerState is what one owner reference of a dependent comes to.
type ownerState int

const (
	solid    ownerState = iota // the owner exists and is not deleting its dependents
	dangling                   // no such owner (gone, another uid at the name, or in another namespace)
	waiting                    // the owner is being deleted in the foreground
	invalid                    // a cluster-scoped dependent names a namespaced kind: never resolved
)

// attemptToDelete decides on a dependent that is not being deleted, from its owners' live
// state, as Kubernetes' attemptToDeleteItem does: with an owner still there, the references to
// owners that are gone or deleting in the foreground are removed; with every owner gone or
// deleting in the foreground, the dependent is deleted: in the foreground when an owner waits
// for it and it has dependents of its own, otherwise as its own finalizers ask (orphan,
// foregroundDeletion) or in the background. Deletes carry the uid and resourceVersion read,
// so a dependent that changed meanwhile is looked at again rather than deleted.
func (c *Collector) attemptToDelete(ctx context.Context, obj *cache.Object, owners []ref) error {
	var solids, gone []ref
	waited := false
	for _, r := range owners {
		st, err := c.classify(ctx, obj, r)
		if err != nil {
			return err
		}
		switch st {
		case invalid:
			// Kubernetes forgets such a dependent: the reference cannot be resolved, so
			// nothing about it may be decided.
			return nil
		case solid:
			solids = append(solids, r)
		case waiting:
			waited = true
			gone = append(gone, r)
		default:
			gone = append(gone, r)
		}
	}
	pre := cache.Preconditions{UID: obj.UID(), ResourceVersion: strconv.FormatUint(obj.ResourceVersion(), 10)}
	switch {
	case len(solids) > 0:
		if len(gone) == 0 {
			return nil
		}
		uids := make([]string, len(gone))
		for i, r := range gone {
			uids[i] = r.UID
		}
		return c.removeOwners(ctx, obj, uids)
	case waited && c.hasDependents(obj.UID()):
		// An owner waits for it and it has dependents: it goes in the foreground too. When one
		// of its dependents is itself waiting (a cycle of owners), its references stop blocking
		// first, as Kubernetes does, or each would wait for the other.
		if c.dependentWaits(obj.UID()) {
			updated, err := c.unblockOwners(ctx, obj)
			if err != nil {
				return err
			}
			pre.ResourceVersion = strconv.FormatUint(updated.ResourceVersion(), 10)
		}
		_, _, err := c.cfg.Client.DeletePropagating(ctx, obj.Key(), pre, metav1.DeletePropagationForeground)
		return err
	}
	var policy metav1.DeletionPropagation = metav1.DeletePropagationBackground
	switch orphan, foreground := finalizersOf(obj.Finalizers()); {
	case orphan:
		policy = metav1.DeletePropagationOrphan
	case foreground:
		policy = metav1.DeletePropagationForeground
	}
	c.cfg.Logger.Debug("garbage collector deletes", "object", obj.Key().String(), "policy", policy)
	_, _, err := c.cfg.Client.DeletePropagating(ctx, obj.Key(), pre, policy)
	return err
}

// classify looks up one owner of dep where Kubernetes looks for it: a namespaced owner in
// dep's namespace, a cluster-scoped one by name alone. A reference whose kind is not served is
// an error (tried again with backoff: its CRD may come), unless its owner was seen to go.
func (c *Collector) classify(ctx context.Context, dep *cache.Object, r ref) (ownerState, error) {
	// As in Kubernetes, a known absence is looked up before the kind (an owner whose CRD went
	// with it is absent, not unresolvable): cluster-scoped first, then in dep's namespace.
	if c.absent.has(ownerKey(r, "")) || (dep.Key().Namespace != "" && c.absent.has(ownerKey(r, dep.Key().Namespace))) {
		return dangling, nil
	}
	k, ok := c.cfg.Kinds.ForKind(r.APIVersion, r.Kind)
	if !ok {
		return solid, fmt.Errorf("owner reference %s/%s %q of %s: %w", r.APIVersion, r.Kind, r.Name, dep.Key(), errKindNotServed)
	}
	gr := storageResource(k)
	ns := ""
	if k.Namespaced {
		if dep.Key().Namespace == "" {
			c.reportInvalid(ctx, dep, r, "")
			return invalid, nil
		}
		ns = dep.Key().Namespace
	}
	owner, err := c.cfg.Client.Get(ctx, cache.Key{Group: gr.Group, Resource: gr.Resource, Namespace: ns, Name: r.Name})
	switch {
	case err == nil && owner.UID() == r.UID:
		if owner.Deleting() && slices.Contains(owner.Finalizers(), metav1.FinalizerDeleteDependents) {
			return waiting, nil
		}
		return solid, nil
	case err != nil && !isNotFound(err):
		return solid, err
	}
	// Not at that name. A namespaced owner elsewhere is an invalid reference: Kubernetes
	// reports it and counts the owner as absent, as here.
	if k.Namespaced {
		elsewhere, err := c.existsElsewhere(ctx, gr, r.UID, ns)
		if err != nil {
			return solid, err
		}
		if elsewhere {
			c.reportInvalid(ctx, dep, r, ns)
			return dangling, nil
		}
	}
	c.absent.add(ownerKey(r, ns))
	return dangling, nil
}

// existsElsewhere reports whether an object of gr outside namespace ns has uid.
func (c *Collector) existsElsewhere(ctx context.Context, gr cache.GroupResource, uid, ns string) (bool, error) {
	l, err := c.cfg.Client.List(ctx, gr)
	if err != nil {
		return false, err
	}
	for _, o := range l.Items {
		if o.UID() == uid && o.Key().Namespace != ns {
			return true, nil
		}
	}
	return false, nil
}

// reportInvalid records Kubernetes' Warning about a reference that cannot be valid.
func (c *Collector) reportInvalid(ctx context.Context, dep *cache.Object, r ref, ns string) {
	if c.cfg.Events == nil {
		return
	}
	k := dep.Key()
	av, kind := k.Resource, k.Resource
	if dk, ok := c.cfg.Kinds.Resource(k.GroupResource()); ok {
		av, kind = dk.GroupVersion(), dk.Kind
	}
	c.cfg.Events.Record(ctx, events.Event{
		Object: events.Ref{APIVersion: av, Kind: kind, Namespace: k.Namespace, Name: k.Name, UID: dep.UID()},
		Type:   events.TypeWarning, Severity: events.Warning, Reason: "OwnerRefInvalidNamespace",
		Message: fmt.Sprintf("ownerRef [%s/%s, namespace: %s, name: %s, uid: %s] does not exist in namespace %q", r.APIVersion, r.Kind, ns, r.Name, r.UID, ns),
		Source:  Source,
	})
}

// deleteDependents is an owner being deleted in the foreground: once no dependent blocks it
// (blockOwnerDeletion), its foregroundDeletion finalizer goes. Until then its blocking
// dependents are looked at again (they were when the owner started deleting: each finds the
// owner waiting and is deleted); a blocking dependent's deletion, or its reference ceasing to
// block, brings the owner back (graph.apply, graph.remove).
func (c *Collector) deleteDependents(ctx context.Context, owner *cache.Object) error {
	c.mu.Lock()
	var deps []dependent
	if c.graph != nil {
		deps = c.graph.dependentsOf(owner.UID())
	}
	c.mu.Unlock()
	var blocking []string
	for _, d := range deps {
		if d.block {
			blocking = append(blocking, d.uid)
		}
	}
	if len(blocking) > 0 {
		c.enqueue(blocking...)
		return nil
	}
	return c.removeFinalizer(ctx, owner, metav1.FinalizerDeleteDependents)
}

// orphanDependents is an owner being deleted with the orphan policy: every dependent loses its
// references to the owner, then the orphan finalizer goes. It returns the owner as it is
// afterwards, nil when it went.
func (c *Collector) orphanDependents(ctx context.Context, owner *cache.Object) (*cache.Object, error) {
	c.mu.Lock()
	var deps []dependent
	if c.graph != nil {
		deps = c.graph.dependentsOf(owner.UID())
	}
	c.mu.Unlock()
	for _, d := range deps {
		obj, err := c.cfg.Client.Get(ctx, d.key)
		if isNotFound(err) || (err == nil && obj.UID() != d.uid) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if err := c.removeOwners(ctx, obj, []string{owner.UID()}); err != nil && !isNotFound(err) {
			return nil, err
		}
	}
	if err := c.removeFinalizer(ctx, owner, metav1.FinalizerOrphanDependents); err != nil {
		return nil, err
	}
	obj, err := c.cfg.Client.Get(ctx, owner.Key())
	if isNotFound(err) || (err == nil && obj.UID() != owner.UID()) {
		return nil, nil
	}
	return obj, err
}

// removeOwners removes the references to uids from obj's ownerReferences, conditional on the
// version read (a conflict is looked at again).
func (c *Collector) removeOwners(ctx context.Context, obj *cache.Object, uids []string) error {
	m, err := obj.Decode()
	if err != nil {
		return err
	}
	md, _ := m["metadata"].(map[string]any)
	refs, _ := md["ownerReferences"].([]any)
	kept := slices.DeleteFunc(slices.Clone(refs), func(v any) bool {
		r, _ := v.(map[string]any)
		uid, _ := r["uid"].(string)
		return slices.Contains(uids, uid)
	})
	if len(kept) == len(refs) {
		return nil
	}
	if len(kept) == 0 {
		delete(md, "ownerReferences")
	} else {
		md["ownerReferences"] = kept
	}
	md["resourceVersion"] = strconv.FormatUint(obj.ResourceVersion(), 10)
	md["uid"] = obj.UID()
	_, err = c.cfg.Client.Update(ctx, obj.Key(), m)
	return err
}

// removeFinalizer removes finalizer f from obj, conditional on the version read; the update
// that removes the last finalizer of an object being deleted removes it.
func (c *Collector) removeFinalizer(ctx context.Context, obj *cache.Object, f string) error {
	if !slices.Contains(obj.Finalizers(), f) {
		return nil
	}
	m, err := registry.WithoutFinalizer(obj, f)
	if err != nil {
		return err
	}
	_, err = c.cfg.Client.Update(ctx, obj.Key(), m)
	return err
}

// unblockOwners sets blockOwnerDeletion false in every ownerReference of obj, conditional on
// the version read, and returns obj as it is then.
func (c *Collector) unblockOwners(ctx context.Context, obj *cache.Object) (*cache.Object, error) {
	m, err := obj.Decode()
	if err != nil {
		return nil, err
	}
	md, _ := m["metadata"].(map[string]any)
	refs, _ := md["ownerReferences"].([]any)
	changed := false
	for _, v := range refs {
		if r, ok := v.(map[string]any); ok && r["blockOwnerDeletion"] == true {
			r["blockOwnerDeletion"] = false
			changed = true
		}
	}
	if !changed {
		return obj, nil
	}
	md["resourceVersion"] = strconv.FormatUint(obj.ResourceVersion(), 10)
	md["uid"] = obj.UID()
	return c.cfg.Client.Update(ctx, obj.Key(), m)
}

// dependentWaits reports whether a dependent of uid is being deleted in the foreground.
func (c *Collector) dependentWaits(uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.graph == nil {
		return false
	}
	n := c.graph.nodes[uid]
	if n == nil {
		return false
	}
	for d := range n.dependents {
		if dn := c.graph.nodes[d]; dn != nil && dn.deletingDependents() {
			return true
		}
	}
	return false
}

func (c *Collector) hasDependents(uid string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.graph != nil && c.graph.hasDependents(uid)
}

// storageResource is where k's objects are stored (a view's are another resource's).
func storageResource(k *kinds.Kind) cache.GroupResource {
	if k.Conversion != nil {
		return k.Conversion.Storage
	}
	return k.GroupResource()
}
