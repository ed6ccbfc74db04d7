package rbac

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sync"

	"github.com/opemu/opemu/cache"
	rbacv1 "k8s.io/api/rbac/v1"
)

// Reader is what the authorizer reads the policy through: the store, as opemu's own client
// (registry.Client implements it).
type Reader interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
}

// The policy's resources.
var (
	grRoles               = cache.GroupResource{Group: rbacv1.GroupName, Resource: "roles"}
	grRoleBindings        = cache.GroupResource{Group: rbacv1.GroupName, Resource: "rolebindings"}
	grClusterRoles        = cache.GroupResource{Group: rbacv1.GroupName, Resource: "clusterroles"}
	grClusterRoleBindings = cache.GroupResource{Group: rbacv1.GroupName, Resource: "clusterrolebindings"}
)

// source reads the policy from a Reader and keeps what it decoded: a list whose objects are
// the very ones of the last list of its scope (the store's objects are immutable and shared)
// costs no decoding, and an object read again at the same resourceVersion neither.
type source struct {
	r Reader

	mu sync.Mutex
	// lists are the last list of each scope (resource and namespace) and its decoded objects.
	lists map[listScope]decodedList
	// objects are the objects read one by one (roles), by key; reset when it holds maxObjects.
	objects map[cache.Key]decodedObject
}

type listScope struct {
	gr cache.GroupResource
	ns string
}

type decodedList struct {
	objs []*cache.Object
	vals []any
}

type decodedObject struct {
	rv uint64
	v  any // *rbacv1.Role or *rbacv1.ClusterRole
}

// maxObjects bounds source.objects: the roles of namespaces long deleted are forgotten.
const maxObjects = 10000

func newSource(r Reader) *source {
	return &source{r: r, lists: map[listScope]decodedList{}, objects: map[cache.Key]decodedObject{}}
}

// list returns every object of gr (in namespace ns, or all when ""), decoded. The results are
// shared: callers must not modify them.
func list[T any](ctx context.Context, s *source, gr cache.GroupResource, ns string) ([]*T, error) {
	var opts []cache.ListOption
	if ns != "" {
		opts = append(opts, cache.InNamespace(ns))
	}
	res, err := s.r.List(ctx, gr, opts...)
	if err != nil {
		return nil, err
	}
	scope := listScope{gr, ns}
	s.mu.Lock()
	last := s.lists[scope]
	s.mu.Unlock()
	out := make([]*T, len(res.Items))
	if slices.Equal(last.objs, res.Items) {
		for i, v := range last.vals {
			out[i] = v.(*T)
		}
		return out, nil
	}
	before := make(map[*cache.Object]any, len(last.objs))
	for i, o := range last.objs {
		before[o] = last.vals[i]
	}
	vals := make([]any, len(res.Items))
	for i, o := range res.Items {
		if v, ok := before[o]; ok {
			out[i], vals[i] = v.(*T), v
			continue
		}
		v := new(T)
		if err := json.Unmarshal(o.Raw(), v); err != nil {
			return nil, err
		}
		out[i], vals[i] = v, v
	}
	s.mu.Lock()
	s.lists[scope] = decodedList{objs: res.Items, vals: vals}
	s.mu.Unlock()
	return out, nil
}

// get returns the object key names, decoded (shared: not to be modified); ok is false when
// there is none.
func get[T any](ctx context.Context, s *source, key cache.Key) (v *T, ok bool, err error) {
	o, err := s.r.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	d, ok := s.objects[key]
	s.mu.Unlock()
	if ok && d.rv == o.ResourceVersion() {
		if v, ok := d.v.(*T); ok {
			return v, true, nil
		}
	}
	v = new(T)
	if err := json.Unmarshal(o.Raw(), v); err != nil {
		return nil, false, err
	}
	s.mu.Lock()
	if len(s.objects) >= maxObjects {
		clear(s.objects)
	}
	s.objects[key] = decodedObject{rv: o.ResourceVersion(), v: v}
	s.mu.Unlock()
	return v, true, nil
}

func (s *source) clusterRoleBindings(ctx context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	return list[rbacv1.ClusterRoleBinding](ctx, s, grClusterRoleBindings, "")
}

func (s *source) roleBindings(ctx context.Context, ns string) ([]*rbacv1.RoleBinding, error) {
	return list[rbacv1.RoleBinding](ctx, s, grRoleBindings, ns)
}

func (s *source) clusterRoles(ctx context.Context) ([]*rbacv1.ClusterRole, error) {
	return list[rbacv1.ClusterRole](ctx, s, grClusterRoles, "")
}

func (s *source) clusterRole(ctx context.Context, name string) (*rbacv1.ClusterRole, bool, error) {
	return get[rbacv1.ClusterRole](ctx, s, cache.Key{Group: rbacv1.GroupName, Resource: "clusterroles", Name: name})
}

func (s *source) role(ctx context.Context, ns, name string) (*rbacv1.Role, bool, error) {
	return get[rbacv1.Role](ctx, s, cache.Key{Group: rbacv1.GroupName, Resource: "roles", Namespace: ns, Name: name})
}
