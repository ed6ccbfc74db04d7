package rbac

import (
	"context"
	"encoding/json"
	"errors"
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

// source reads the policy from a Reader and keeps each object decoded until its
// resourceVersion changes: a decision decodes only what was written since the last one.
type source struct {
	r Reader

	mu      sync.Mutex
	decoded map[cache.Key]decodedObject
}

type decodedObject struct {
	rv uint64
	v  any // *rbacv1.Role, *rbacv1.RoleBinding, *rbacv1.ClusterRole or *rbacv1.ClusterRoleBinding
}

func newSource(r Reader) *source {
	return &source{r: r, decoded: map[cache.Key]decodedObject{}}
}

// decode returns o decoded into a new T, or the one decoded before at the same version. The
// result is shared: callers must not modify it.
func decode[T any](s *source, o *cache.Object) (*T, error) {
	s.mu.Lock()
	d, ok := s.decoded[o.Key()]
	s.mu.Unlock()
	if ok && d.rv == o.ResourceVersion() {
		if v, ok := d.v.(*T); ok {
			return v, nil
		}
	}
	v := new(T)
	if err := json.Unmarshal(o.Raw(), v); err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.decoded[o.Key()] = decodedObject{rv: o.ResourceVersion(), v: v}
	s.mu.Unlock()
	return v, nil
}

// list returns every object of gr (in namespace ns, or all when ""), decoded, and forgets the
// decoded objects of that scope that are gone.
func list[T any](ctx context.Context, s *source, gr cache.GroupResource, ns string) ([]*T, error) {
	var opts []cache.ListOption
	if ns != "" {
		opts = append(opts, cache.InNamespace(ns))
	}
	res, err := s.r.List(ctx, gr, opts...)
	if err != nil {
		return nil, err
	}
	out := make([]*T, 0, len(res.Items))
	seen := make(map[cache.Key]bool, len(res.Items))
	for _, o := range res.Items {
		v, err := decode[T](s, o)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
		seen[o.Key()] = true
	}
	s.forget(gr, ns, seen)
	return out, nil
}

// forget drops the decoded objects of gr in ns (every namespace when "") not in seen.
func (s *source) forget(gr cache.GroupResource, ns string, seen map[cache.Key]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.decoded {
		if k.GroupResource() == gr && (ns == "" || k.Namespace == ns) && !seen[k] {
			delete(s.decoded, k)
		}
	}
}

// get returns the object key names, decoded; ok is false when there is none.
func get[T any](ctx context.Context, s *source, key cache.Key) (v *T, ok bool, err error) {
	o, err := s.r.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v, err = decode[T](s, o)
	return v, err == nil, err
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
