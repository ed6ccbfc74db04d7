package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/webhooks"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/informers"
	listersv1 "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// What kube-apiserver's admission framework gives the policy plugins, made from opemu's write
// path: the request as admission.Attributes, the object interfaces, and listers that read the
// store (namespaces, parameters) on each request, so a parameter written a moment ago is seen.

// attributes describes req as kube-apiserver's admission.Attributes. The objects are copies
// with kube's number types (CEL takes int64 and float64, not json.Number: registry.PlainNumbers).
func attributes(req *webhooks.Request) admission.Attributes {
	return attributesOf(req, registry.PlainNumbers)
}

// matchAttributes describes req for matching alone: its own maps, uncopied (the matcher reads
// the object's labels, nothing else).
func matchAttributes(req *webhooks.Request) admission.Attributes {
	return attributesOf(req, func(m map[string]any) map[string]any { return m })
}

func attributesOf(req *webhooks.Request, content func(map[string]any) map[string]any) admission.Attributes {
	var obj, old runtime.Object
	if req.Object != nil && req.Operation != webhooks.Delete {
		obj = &unstructured.Unstructured{Object: content(req.Object)}
	}
	if req.OldObject != nil {
		old = &unstructured.Unstructured{Object: content(req.OldObject)}
	}
	var opts runtime.Object
	if req.Options != nil {
		opts = &unstructured.Unstructured{Object: content(req.Options)}
	}
	u := &user.DefaultInfo{Name: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups}
	if len(req.UserInfo.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range req.UserInfo.Extra {
			u.Extra[k] = v
		}
	}
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	gvr := schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}
	return admission.NewAttributesRecord(obj, old, gvk, req.Namespace, req.Name, gvr, req.SubResource,
		admission.Operation(req.Operation), opts, req.DryRun, u)
}

// objectInterfaces are admission.ObjectInterfaces over unstructured objects: a request's object
// is judged in its own version (matchPolicy Equivalent matches other versions of a resource
// only where kube-apiserver's equivalent-resource registry would; opemu's is empty).
type objectInterfaces struct {
	scheme   *runtime.Scheme
	mapper   runtime.EquivalentResourceMapper
	creater  unstructuredCreater
	convertr unstructuredConvertor
}

func newObjectInterfaces() *objectInterfaces {
	return &objectInterfaces{scheme: runtime.NewScheme(), mapper: runtime.NewEquivalentResourceRegistry()}
}

func (o *objectInterfaces) GetObjectCreater() runtime.ObjectCreater     { return o.creater }
func (o *objectInterfaces) GetObjectTyper() runtime.ObjectTyper         { return o.scheme }
func (o *objectInterfaces) GetObjectDefaulter() runtime.ObjectDefaulter { return o.scheme }
func (o *objectInterfaces) GetObjectConvertor() runtime.ObjectConvertor { return o.convertr }
func (o *objectInterfaces) GetEquivalentResourceMapper() runtime.EquivalentResourceMapper {
	return o.mapper
}

type unstructuredCreater struct{}

func (unstructuredCreater) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// unstructuredConvertor "converts" an unstructured object into another of the same kind and
// version (what the mutating dispatcher does to hand its result back): a copy of the content.
type unstructuredConvertor struct{}

func (unstructuredConvertor) Convert(in, out, _ any) error {
	i, ok1 := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok1 || !ok2 {
		return fmt.Errorf("policies: cannot convert %T into %T", in, out)
	}
	if i.GroupVersionKind() != o.GroupVersionKind() && !o.GroupVersionKind().Empty() {
		return fmt.Errorf("policies: no conversion from %v to %v", i.GroupVersionKind(), o.GroupVersionKind())
	}
	o.Object = i.Object
	return nil
}

func (c unstructuredConvertor) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	if gvk, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{in.GetObjectKind().GroupVersionKind()}); ok && gvk == in.GetObjectKind().GroupVersionKind() {
		return in, nil
	}
	return nil, fmt.Errorf("policies: no conversion of %v", in.GetObjectKind().GroupVersionKind())
}

func (unstructuredConvertor) ConvertFieldLabel(gvk schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

var _ runtime.ObjectConvertor = unstructuredConvertor{}

// Reader is how policies read the API: the in-process client (registry.Client).
type Reader interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
}

// namespaces is the NamespaceLister the matcher reads namespaceSelector's labels from.
type namespaces struct{ r Reader }

var namespacesResource = cache.GroupResource{Resource: "namespaces"}

func (n namespaces) Get(name string) (*corev1.Namespace, error) {
	o, err := n.r.Get(context.Background(), cache.Key{Resource: "namespaces", Name: name})
	if errors.Is(err, cache.ErrNotFound) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, name)
	}
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{}
	return ns, json.Unmarshal(o.Raw(), ns)
}

func (n namespaces) List(sel labels.Selector) ([]*corev1.Namespace, error) {
	res, err := n.r.List(context.Background(), namespacesResource, cache.MatchingLabels(sel))
	if err != nil {
		return nil, err
	}
	out := make([]*corev1.Namespace, 0, len(res.Items))
	for _, o := range res.Items {
		ns := &corev1.Namespace{}
		if err := json.Unmarshal(o.Raw(), ns); err != nil {
			return nil, err
		}
		out = append(out, ns)
	}
	return out, nil
}

var _ listersv1.NamespaceLister = namespaces{}

// params is the "informer" of a policy's paramKind, as generic.CollectParams reads it: a
// lister over the store (always in sync: it reads the store itself).
type params struct {
	r  Reader
	gr cache.GroupResource
	ns string
}

// paramsFor resolves a paramKind ("group/version", kind) to its informer and scope; ok is
// false when no such kind is served (kube's "failed to find resource referenced by
// paramKind").
func paramsFor(r Reader, ks *kinds.Registry, apiVersion, kind string) (informers.GenericInformer, meta.RESTScope, bool) {
	k, ok := ks.ForKind(apiVersion, kind)
	if !ok {
		return nil, nil, false
	}
	scope := meta.RESTScopeRoot
	if k.Namespaced {
		scope = meta.RESTScopeNamespace
	}
	return params{r: r, gr: k.GroupResource()}, scope, true
}

func (p params) Informer() toolscache.SharedIndexInformer { return synced{} }
func (p params) Lister() toolscache.GenericLister         { return p }

func (p params) ByNamespace(ns string) toolscache.GenericNamespaceLister {
	return params{r: p.r, gr: p.gr, ns: ns}
}

func (p params) Get(name string) (runtime.Object, error) {
	o, err := p.r.Get(context.Background(), cache.Key{Group: p.gr.Group, Resource: p.gr.Resource, Namespace: p.ns, Name: name})
	if errors.Is(err, cache.ErrNotFound) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: p.gr.Group, Resource: p.gr.Resource}, name)
	}
	if err != nil {
		return nil, err
	}
	return decodeUnstructured(o)
}

func (p params) List(sel labels.Selector) ([]runtime.Object, error) {
	opts := []cache.ListOption{cache.MatchingLabels(sel)}
	if p.ns != "" {
		opts = append(opts, cache.InNamespace(p.ns))
	}
	res, err := p.r.List(context.Background(), p.gr, opts...)
	if err != nil {
		return nil, err
	}
	out := make([]runtime.Object, 0, len(res.Items))
	for _, o := range res.Items {
		u, err := decodeUnstructured(o)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, nil
}

func decodeUnstructured(o *cache.Object) (runtime.Object, error) {
	m, err := o.Decode()
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: registry.PlainNumbers(m)}, nil
}

// synced is the informer of params: CollectParams asks only whether it has synced.
type synced struct{ toolscache.SharedIndexInformer }

func (synced) HasSynced() bool { return true }
