package cache

import (
	"context"
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// ListOption narrows a List (controller-runtime style).
type ListOption func(*listOptions)

type listOptions struct {
	namespace     string
	label         labels.Selector
	field         fields.Selector
	limit         int
	afterNS       string
	afterName     string
	after         bool
	resourceCheck uint64
}

// InNamespace lists only objects in namespace ns ("" means every namespace).
func InNamespace(ns string) ListOption { return func(o *listOptions) { o.namespace = ns } }

// MatchingLabels lists only objects whose labels match sel (nil means everything).
func MatchingLabels(sel labels.Selector) ListOption { return func(o *listOptions) { o.label = sel } }

// MatchingFields lists only objects whose selectable fields match sel (nil means everything).
func MatchingFields(sel fields.Selector) ListOption { return func(o *listOptions) { o.field = sel } }

// Limit returns at most n objects (n <= 0 means no limit); ListResult.Remaining says how many
// more match.
func Limit(n int) ListOption { return func(o *listOptions) { o.limit = n } }

// After lists only objects whose key sorts after (namespace, name): the continuation of a
// paged list.
func After(namespace, name string) ListOption {
	return func(o *listOptions) { o.afterNS, o.afterName, o.after = namespace, name, true }
}

// ListResult is one page of a List.
type ListResult struct {
	Items           []*Object // sorted by namespace, then name; shared, immutable
	ResourceVersion uint64    // the counter at the moment of the list
	Remaining       int       // matching objects after this page (0 when it is the last)
}

// List returns the objects of gr matching opts, in key order.
func (c *watchCache) List(_ context.Context, gr GroupResource, opts ...ListOption) (ListResult, error) {
	var o listOptions
	for _, f := range opts {
		f(&o)
	}
	c.mu.RLock()
	rv := c.rv
	var items []*Object
	if st := c.resources[gr]; st != nil {
		collect := func(ns string, m map[string]*Object) {
			for _, obj := range m {
				if o.after && (ns < o.afterNS || ns == o.afterNS && obj.key.Name <= o.afterName) {
					continue
				}
				items = append(items, obj)
			}
		}
		if o.namespace != "" {
			collect(o.namespace, st.byNS[o.namespace])
		} else {
			for ns, m := range st.byNS {
				collect(ns, m)
			}
		}
	}
	c.mu.RUnlock()
	// Selectors run outside the lock: a costly one delays this list, never a writer.
	if !(o.label == nil || o.label.Empty()) || !(o.field == nil || o.field.Empty()) {
		kept := items[:0]
		for _, obj := range items {
			if matches(obj, o.label, o.field) {
				kept = append(kept, obj)
			}
		}
		clear(items[len(kept):])
		items = kept
	}
	sort.Slice(items, func(i, j int) bool {
		a, b := items[i].key, items[j].key
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	res := ListResult{Items: items, ResourceVersion: rv}
	if o.limit > 0 && len(items) > o.limit {
		res.Items, res.Remaining = items[:o.limit], len(items)-o.limit
	}
	return res, nil
}

func matches(o *Object, label labels.Selector, field fields.Selector) bool {
	if label != nil && !label.Empty() && !label.Matches(o.labels()) {
		return false
	}
	if field != nil && !field.Empty() && !field.Matches(objectFields{&o.key, o.fields()}) {
		return false
	}
	return true
}

// CheckResourceVersion reports whether every change after rv to the given resources (every
// resource when none are named) is still in history: nil if so, an error wrapping ErrGone if rv
// is older than the history or was never issued by this store.
func (c *watchCache) CheckResourceVersion(rv uint64, grs ...GroupResource) error {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.checkRVLocked(rv, grs)
}

func (c *watchCache) checkRVLocked(rv uint64, grs []GroupResource) error {
	if rv > c.rv || rv < c.startRV {
		return goneError(rv, c.oldestLocked(grs))
	}
	if oldest := c.oldestLocked(grs); rv < oldest {
		return goneError(rv, oldest)
	}
	return nil
}

// oldestLocked is the oldest version a watch on grs can resume from.
func (c *watchCache) oldestLocked(grs []GroupResource) uint64 {
	oldest := c.startRV
	check := func(st *resourceState) {
		if st != nil && st.history.since > oldest {
			oldest = st.history.since
		}
	}
	if len(grs) == 0 {
		for _, st := range c.resources {
			check(st)
		}
	}
	for _, gr := range grs {
		check(c.resources[gr])
	}
	return oldest
}

// WaitUntilFresh returns nil at once for rv 0 or a version the store has issued: the store is
// its own truth, so its reads are always fresh. A greater version is an error wrapping
// ErrTimeout at once (nothing else writes to this store, so waiting would not help).
func (s *Store) WaitUntilFresh(_ context.Context, rv uint64) error {
	if cur := s.ResourceVersion(); rv > cur {
		return &Error{Err: ErrTimeout, Message: fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur)}
	}
	return nil
}

// ResourceCount is the number of objects of one resource in one namespace.
type ResourceCount struct {
	GroupResource
	Namespace string
	Count     int
}

// Counts returns the current object counts per resource and namespace. The store keeps them
// as it writes; this only reads them.
func (c *watchCache) Counts() []ResourceCount {
	c.mu.RLock()
	defer c.mu.RUnlock()
	var out []ResourceCount
	for gr, st := range c.resources {
		for ns, m := range st.byNS {
			out = append(out, ResourceCount{GroupResource: gr, Namespace: ns, Count: len(m)})
		}
	}
	return out
}
