package cache

import "sort"

func namespaceKey(name string) Key { return Key{Resource: NamespacesResource.Resource, Name: name} }

// ensureNamespaceLocked creates the Namespace object name (an ADDED event) unless it exists.
func (s *Store) ensureNamespaceLocked(name string) error {
	key := namespaceKey(name)
	if s.getLocked(key) != nil {
		return nil
	}
	obj := map[string]any{
		"apiVersion": "v1",
		"kind":       "Namespace",
		"metadata": map[string]any{
			"name":              name,
			"uid":               s.cfg.NewUID(),
			"creationTimestamp": s.now(),
			"resourceVersion":   formatRV(s.rv + 1),
			"labels":            map[string]any{"kubernetes.io/metadata.name": name},
		},
		"spec":   map[string]any{"finalizers": []any{"kubernetes"}},
		"status": map[string]any{"phase": "Active"},
	}
	o, err := s.build(key, obj)
	if err != nil {
		return err
	}
	s.commitLocked(Added, o, nil)
	return nil
}

// deleteNamespaceLocked marks the namespace Terminating, deletes every object in it (honouring
// finalizers), and removes it when nothing is left.
func (s *Store) deleteNamespaceLocked(cur *Object, opts WriteOptions) (*Object, bool, error) {
	name := cur.key.Name
	if name == ProtectedNamespace {
		return nil, false, newErr(ErrForbidden, cur.key, "this namespace may not be deleted")
	}
	if cur.deleting {
		return cur, false, nil
	}
	marked, err := s.rewriteLocked(cur, Modified, opts.DryRun, func(obj map[string]any) {
		metadataOf(obj)["deletionTimestamp"] = s.now()
		obj["status"] = map[string]any{"phase": "Terminating"}
	})
	if err != nil || opts.DryRun {
		return marked, false, err
	}

	grs := make([]GroupResource, 0, len(s.resources))
	for gr, st := range s.resources {
		if len(st.byNS[name]) > 0 {
			grs = append(grs, gr)
		}
	}
	sort.Slice(grs, func(i, j int) bool { return grs[i].String() < grs[j].String() })
	for _, gr := range grs {
		for _, o := range sortedObjects(s.resources[gr].byNS[name]) {
			if _, _, err := s.deleteLocked(o, WriteOptions{}); err != nil {
				return nil, false, err
			}
		}
	}
	// The last removal above already removed the namespace if it emptied it; an empty one goes now.
	s.finishNamespaceLocked(name)
	if now := s.getLocked(cur.key); now != nil {
		return now, false, nil
	}
	return marked, true, nil
}

// finishNamespaceLocked removes a Terminating namespace once no object is left in it.
func (s *Store) finishNamespaceLocked(name string) {
	key := namespaceKey(name)
	ns := s.getLocked(key)
	if ns == nil || !ns.deleting {
		return
	}
	for _, st := range s.resources {
		if len(st.byNS[name]) > 0 {
			return
		}
	}
	_, _ = s.rewriteLocked(ns, Deleted, false, nil)
}

func sortedObjects(m map[string]*Object) []*Object {
	out := make([]*Object, 0, len(m))
	for _, o := range m {
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key.Name < out[j].key.Name })
	return out
}
