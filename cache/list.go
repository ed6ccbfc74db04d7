package cache

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

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
	atRV          uint64
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

// After lists only objects whose key sorts after (namespace, name) (see CompareKeys): the
// continuation of a paged list.
func After(namespace, name string) ListOption {
	return func(o *listOptions) { o.afterNS, o.afterName, o.after = namespace, name, true }
}

// AtVersion lists the objects as they were at version rv rather than now (an exact list, the
// later pages of a paged list), rebuilt from the resource's history: a version older than that
// history, or one the store has not issued, fails with an error wrapping ErrGone. Zero means
// now.
func AtVersion(rv uint64) ListOption { return func(o *listOptions) { o.atRV = rv } }

// ListResult is one page of a List.
type ListResult struct {
	Items           []*Object // in key order (CompareKeys); shared, immutable
	ResourceVersion uint64    // the counter at the moment of the list (AtVersion's version)
	Remaining       int       // matching objects after this page (0 when it is the last)
}

// CompareKeys orders objects of one resource as kube-apiserver's storage lists them: by the
// string "<namespace>/<name>" (just the name when cluster-scoped), so a namespace whose name
// extends another's with "-" sorts before it ("a-b/x" < "a/x"). It returns -1, 0 or +1.
func CompareKeys(aNS, aName, bNS, bName string) int {
	if aNS == bNS {
		return strings.Compare(aName, bName)
	}
	n := min(len(aNS), len(bNS))
	if c := strings.Compare(aNS[:n], bNS[:n]); c != 0 {
		return c
	}
	// One namespace extends the other: the shorter one's "/" meets the longer one's next byte.
	if len(aNS) < len(bNS) {
		return cmp.Compare('/', bNS[n])
	}
	return cmp.Compare(aNS[n], '/')
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
	st := c.resources[gr]
	var then map[Key]*Object // AtVersion: the state at atRV of every key changed since
	if o.atRV != 0 && o.atRV != rv {
		if err := c.checkRVLocked(o.atRV, []GroupResource{gr}); err != nil {
			c.mu.RUnlock()
			return ListResult{}, err
		}
		rv, then = o.atRV, st.stateAt(o.atRV)
	}
	take := func(obj *Object) {
		if o.namespace != "" && obj.key.Namespace != o.namespace ||
			o.after && CompareKeys(obj.key.Namespace, obj.key.Name, o.afterNS, o.afterName) <= 0 {
			return
		}
		items = append(items, obj)
	}
	if st != nil {
		collect := func(m map[string]*Object) {
			for _, obj := range m {
				if _, changed := then[obj.key]; !changed {
					take(obj)
				}
			}
		}
		if o.namespace != "" {
			collect(st.byNS[o.namespace])
		} else {
			for _, m := range st.byNS {
				collect(m)
			}
		}
	}
	for _, obj := range then {
		if obj != nil {
			take(obj)
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
	slices.SortFunc(items, func(a, b *Object) int {
		return CompareKeys(a.key.Namespace, a.key.Name, b.key.Namespace, b.key.Name)
	})
	res := ListResult{Items: items, ResourceVersion: rv}
	if o.limit > 0 && len(items) > o.limit {
		res.Items, res.Remaining = items[:o.limit], len(items)-o.limit
	}
	return res, nil
}

// stateAt returns, for every key the resource's history changed after rv, its object at rv
// (nil: it did not exist then). Called with the cache's lock held; st may be nil.
func (st *resourceState) stateAt(rv uint64) map[Key]*Object {
	then := map[Key]*Object{}
	if st == nil {
		return then
	}
	st.history.after(rv, func(ev Event) {
		if _, seen := then[ev.Object.key]; seen {
			return // an earlier change after rv already says what it was at rv
		}
		if ev.Type == Added {
			then[ev.Object.key] = nil
		} else {
			then[ev.Object.key] = ev.prev
		}
	})
	return then
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
