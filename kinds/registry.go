package kinds

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/opemu/opemu/cache"
)

type gvr struct{ group, version, plural string }

// Registry holds every served kind. Create it with New; the zero value is not usable.
type Registry struct {
	gen atomic.Uint64

	// mu guards the maps below.
	mu      sync.RWMutex
	byGVR   map[gvr]*Kind
	byGR    map[cache.GroupResource]*Kind // the storage version of each resource
	byOwner map[string][]*Kind            // by CRDName; "" holds the built-in kinds
}

// New returns a registry holding the built-in kinds of Builtins, where each kind of with takes
// the place of the built-in kind of its group, version and resource (a kind whose rules are
// wired by its owner: package events' Event kind, with its TTL and limit).
func New(with ...*Kind) *Registry {
	r := &Registry{byGVR: map[gvr]*Kind{}, byGR: map[cache.GroupResource]*Kind{}, byOwner: map[string][]*Kind{}}
	builtins := Builtins()
	for _, w := range with {
		i := slices.IndexFunc(builtins, func(k *Kind) bool {
			return k.Group == w.Group && k.Version == w.Version && k.Plural == w.Plural
		})
		if i < 0 {
			builtins = append(builtins, w)
		} else {
			builtins[i] = w
		}
	}
	if err := r.Add(builtins...); err != nil {
		panic(err) // the built-in table is a constant; a conflict in it, or in with, is a programming error
	}
	return r
}

// Generation increases on every change; the server derives OpenAPI hashes from it.
func (r *Registry) Generation() uint64 { return r.gen.Load() }

// Add serves built-in kinds (CRDName empty). A kind whose group, version and resource is
// already served is an error.
func (r *Registry) Add(ks ...*Kind) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range ks {
		if k.CRDName != "" {
			return fmt.Errorf("kinds: %s is defined by a CRD; use Replace", k.Plural)
		}
		if _, ok := r.byGVR[gvr{k.Group, k.Version, k.Plural}]; ok {
			return fmt.Errorf("kinds: %s/%s %s is already served", k.Group, k.Version, k.Plural)
		}
	}
	for _, k := range ks {
		r.addLocked(k, k.Conversion == nil) // a view is served, its storage is another kind's
	}
	r.byOwner[""] = append(r.byOwner[""], ks...)
	r.gen.Add(1)
	return nil
}

func (r *Registry) addLocked(k *Kind, storage bool) {
	if k.StorageVersion == "" {
		k.StorageVersion = k.Version
	}
	r.byGVR[gvr{k.Group, k.Version, k.Plural}] = k
	if storage {
		r.byGR[k.GroupResource()] = k
	}
}

// Replace serves the kinds a CRD defines, in place of those it defined before: served are
// its served versions, storage its storage version's kind (served or not). Conflicts with
// other owners are the caller's to check first (crd does, with field errors).
func (r *Registry) Replace(crdName string, served []*Kind, storage *Kind) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(crdName)
	for _, k := range served {
		r.addLocked(k, false)
	}
	r.byGR[storage.GroupResource()] = storage
	r.byOwner[crdName] = append(append([]*Kind(nil), served...), storage)
	r.gen.Add(1)
}

// Remove stops serving the kinds crdName defined.
func (r *Registry) Remove(crdName string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removeLocked(crdName)
	r.gen.Add(1)
}

func (r *Registry) removeLocked(owner string) {
	for _, k := range r.byOwner[owner] {
		if r.byGVR[gvr{k.Group, k.Version, k.Plural}] == k {
			delete(r.byGVR, gvr{k.Group, k.Version, k.Plural})
		}
		if r.byGR[k.GroupResource()] == k {
			delete(r.byGR, k.GroupResource())
		}
	}
	delete(r.byOwner, owner)
}

// Lookup returns the kind served at group/version/plural.
func (r *Registry) Lookup(group, version, plural string) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.byGVR[gvr{group, version, plural}]
	return k, ok
}

// Resource returns the storage version's kind of a resource.
func (r *Registry) Resource(gr cache.GroupResource) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.byGR[gr]
	return k, ok
}

// ForKind returns the kind served as apiVersion ("group/version", or "v1" for core) and kind.
func (r *Registry) ForKind(apiVersion, kind string) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, k := range r.byGVR {
		if k.Kind == kind && k.GroupVersion() == apiVersion {
			return k, true
		}
	}
	return nil, false
}

// Owner returns the resource that owns group and kind name, or ok false: the check a new
// definition must pass not to take another's names.
func (r *Registry) Owner(group, kind string) (crdName string, ok bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for owner, ks := range r.byOwner {
		for _, k := range ks {
			if k.Group == group && k.Kind == kind {
				return owner, true
			}
		}
	}
	return "", false
}

// All returns every served kind: built-in kinds first (by group and resource), then custom
// ones by group, version and resource.
func (r *Registry) All() []*Kind {
	r.mu.RLock()
	out := make([]*Kind, 0, len(r.byGVR))
	for _, k := range r.byGVR {
		out = append(out, k)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.BuiltIn() != b.BuiltIn() {
			return a.BuiltIn()
		}
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Plural < b.Plural
	})
	return out
}

// Custom returns the served kinds CRDs define, in All's order.
func (r *Registry) Custom() []*Kind {
	var out []*Kind
	for _, k := range r.All() {
		if !k.BuiltIn() {
			out = append(out, k)
		}
	}
	return out
}

// Resolve returns the resources a user's name for a kind means: its kind, plural, singular or
// short name, in any case (`kubectl get app`, `/watch?kind=Application`).
func (r *Registry) Resolve(name string) []cache.GroupResource {
	name = strings.ToLower(strings.TrimSpace(name))
	var out []cache.GroupResource
	for _, k := range r.All() {
		if name != strings.ToLower(k.Kind) && name != k.Plural && name != k.Singular && !containsFold(k.ShortNames, name) {
			continue
		}
		gr := k.GroupResource()
		if !contains(out, gr) {
			out = append(out, gr)
		}
	}
	return out
}

// AppendFields appends the selectable field names and values of obj, stored in resource gr,
// to dst (Kind.AppendFields): the store's Config.SelectableFields.
func (r *Registry) AppendFields(gr cache.GroupResource, obj map[string]any, dst []string) []string {
	k, ok := r.Resource(gr)
	if !ok {
		return dst
	}
	return k.AppendFields(dst, obj)
}

func containsFold(l []string, s string) bool {
	for _, x := range l {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

func contains(l []cache.GroupResource, gr cache.GroupResource) bool {
	for _, x := range l {
		if x == gr {
			return true
		}
	}
	return false
}
