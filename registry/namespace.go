package registry

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sort"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Namespace lifecycle (SPEC §2): namespaces exist implicitly (a successful write into one
// creates it); deleting one marks it Terminating, deletes its objects (honouring finalizers)
// and removes it once the last is gone; creates into a Terminating namespace get 403; the
// default namespace cannot be deleted.

// DefaultNamespace exists from the start and cannot be deleted.
const DefaultNamespace = "default"

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

// admitIntoNamespace refuses a create into a Terminating namespace and creates a missing one
// (not for a dry run). The caller holds the namespace's stripe shared.
func (s *Store) admitIntoNamespace(ctx context.Context, key cache.Key, o Options) error {
	ns, err := s.cfg.Storage.Get(ctx, namespaceKey(key.Namespace))
	switch {
	case err == nil && ns.Deleting():
		return apierrors.NewForbidden(schema.GroupResource{Group: key.Group, Resource: key.Resource}, key.Name,
			fmt.Errorf("unable to create new content in namespace %s because it is being terminated", key.Namespace))
	case err == nil || o.DryRun:
		return nil
	case !errors.Is(err, cache.ErrNotFound):
		return err
	}
	return s.ensureNamespace(ctx, key.Namespace)
}

// ensureNamespace creates the namespace name through the write path unless it exists.
func (s *Store) ensureNamespace(ctx context.Context, name string) error {
	t, err := s.TargetOf(namespaceKey(""))
	if err != nil {
		return err
	}
	obj := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}
	_, err = s.Create(ctx, t, obj, Options{Internal: true})
	if errors.Is(err, cache.ErrAlreadyExists) {
		return nil
	}
	return err
}

// deleteNamespace marks the namespace Terminating, deletes every object in it (honouring
// finalizers), and removes it when nothing is left.
func (s *Store) deleteNamespace(ctx context.Context, t Target, pre cache.Preconditions, o Options) (*cache.Object, bool, error) {
	name := t.Key.Name
	if name == DefaultNamespace {
		return nil, false, apierrors.NewForbidden(t.GroupResource(), name, errors.New("this namespace may not be deleted"))
	}
	unlock := s.lockNamespace(name, true)
	marked, err := s.cfg.Storage.GuaranteedUpdate(ctx, t.Key, pre, func(cur *cache.Object) (cache.Update, error) {
		if cur.Deleting() {
			return cache.Update{}, nil
		}
		obj, err := cur.Decode()
		if err != nil {
			return cache.Update{}, err
		}
		metadataOf(obj)["deletionTimestamp"] = s.now()
		obj["status"] = map[string]any{"phase": "Terminating"}
		return cache.Update{Object: obj}, nil
	}, cache.WriteOptions{DryRun: o.DryRun})
	unlock()
	if err != nil || o.DryRun {
		return marked, false, err
	}
	for _, gr := range s.resourcesIn(name) {
		res, err := s.cfg.Storage.List(ctx, gr, cache.InNamespace(name))
		if err != nil {
			return nil, false, err
		}
		for _, obj := range res.Items {
			ot, err := s.TargetOf(obj.Key())
			if err != nil {
				return nil, false, err
			}
			if _, _, err := s.deleteObject(ctx, ot, cache.Preconditions{}, Options{Internal: true}); err != nil && !errors.Is(err, cache.ErrNotFound) {
				return nil, false, err
			}
		}
	}
	if gone, err := s.finishNamespace(ctx, name); err != nil || gone != nil {
		return gone, gone != nil, err
	}
	now, err := s.cfg.Storage.Get(ctx, t.Key)
	if errors.Is(err, cache.ErrNotFound) {
		return marked, true, nil
	}
	return now, false, err
}

// resourcesIn returns the resources holding objects in namespace ns, sorted.
func (s *Store) resourcesIn(ns string) []cache.GroupResource {
	var grs []cache.GroupResource
	for _, c := range s.cfg.Storage.Counts() {
		if c.Namespace == ns && c.Count > 0 {
			grs = append(grs, c.GroupResource)
		}
	}
	sort.Slice(grs, func(i, j int) bool { return grs[i].String() < grs[j].String() })
	return grs
}

// finishNamespace removes a Terminating namespace once no object is left in it; it returns the
// removed namespace, or nil when there is nothing to do.
func (s *Store) finishNamespace(ctx context.Context, name string) (*cache.Object, error) {
	// Every removal calls this: while the namespace is not Terminating (a flag that only ever
	// goes on, and whose setter finishes the namespace itself after its cascade), answer
	// without the exclusive stripe, which would wait for every write in flight there.
	if ns, err := s.cfg.Storage.Get(ctx, namespaceKey(name)); err != nil || !ns.Deleting() {
		return nil, nil
	}
	unlock := s.lockNamespace(name, true)
	defer unlock()
	ns, err := s.cfg.Storage.Get(ctx, namespaceKey(name))
	if err != nil || !ns.Deleting() || len(s.resourcesIn(name)) > 0 {
		return nil, nil
	}
	gone, err := s.cfg.Storage.Delete(ctx, namespaceKey(name), cache.Preconditions{ResourceVersion: formatRV(ns.ResourceVersion())}, cache.WriteOptions{})
	if errors.Is(err, cache.ErrNotFound) || errors.Is(err, cache.ErrConflict) {
		return nil, nil
	}
	return gone, err
}

// FinishNamespaces does, once, what the cascade of a namespace's deletion leaves undone when
// replicas share the store: for every Terminating namespace it deletes the objects still in
// it (those created through another replica that the deleting one had not seen yet, or left by
// a replica that stopped mid-cascade), honouring finalizers, and removes the namespace when
// nothing is left. Only the leader runs it, every second (SPEC §12).
func (s *Store) FinishNamespaces(ctx context.Context) error {
	res, err := s.cfg.Storage.List(ctx, kinds.Namespaces)
	if err != nil {
		return err
	}
	for _, ns := range res.Items {
		if !ns.Deleting() {
			continue
		}
		name := ns.Key().Name
		for _, gr := range s.resourcesIn(name) {
			objs, err := s.cfg.Storage.List(ctx, gr, cache.InNamespace(name))
			if err != nil {
				return err
			}
			for _, obj := range objs.Items {
				if obj.Deleting() {
					continue // marked: its finalizers' owners remove it
				}
				ot, err := s.TargetOf(obj.Key())
				if err != nil {
					// A resource no longer served (its CRD's drop did not finish): it goes as is.
					if _, err := s.cfg.Storage.Delete(ctx, obj.Key(), cache.Preconditions{}, cache.WriteOptions{}); err != nil && !errors.Is(err, cache.ErrNotFound) {
						return err
					}
					continue
				}
				if _, _, err := s.deleteObject(ctx, ot, cache.Preconditions{}, Options{Internal: true}); err != nil && !errors.Is(err, cache.ErrNotFound) {
					return err
				}
			}
		}
		if _, err := s.finishNamespace(ctx, name); err != nil {
			return err
		}
	}
	return nil
}
