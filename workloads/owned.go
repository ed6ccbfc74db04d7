package workloads

import (
	"bytes"
	"context"
	"encoding/json"

	"github.com/opemu/opemu/cache"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Owner is a kind that owns children through controller ownerReferences: its resource and
// the apiVersion and kind its children's references name.
type Owner struct {
	Resource   cache.GroupResource
	APIVersion string
	Kind       string
}

// The owners of the controllers here.
var (
	DeploymentOwner = Owner{Resource: DeploymentResource, APIVersion: "apps/v1", Kind: "Deployment"}
	ReplicaSetOwner = Owner{Resource: ReplicaSetResource, APIVersion: "apps/v1", Kind: "ReplicaSet"}
)

// Watcher is how FollowChildren watches: the in-process client.
type Watcher interface {
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
}

// FollowChildren watches children (every change, status included) and calls enqueue with
// the key of each one's controller of kind owner, until ctx is done: how the ReplicaSet
// controller hears of its Pods, the Deployment controller of its ReplicaSets, as their
// informers' event handlers do in kube-controller-manager. A watch that ends early (it fell
// behind) is opened again; enqueue may report false (the controller is not running).
func FollowChildren(ctx context.Context, w Watcher, children cache.GroupResource, owner Owner, enqueue func(cache.Key) bool) {
	needle := []byte(`"kind":"` + owner.Kind + `"`)
	cache.Follow(ctx, w, cache.WatchOptions{Resources: []cache.GroupResource{children}}, func(ev cache.Event) {
		if ev.Object == nil || !bytes.Contains(ev.Object.Raw(), needle) {
			return // no reference to an owner of that kind: nothing to decode
		}
		if ref := controllerOf(ev.Object); ref != nil && ref.Kind == owner.Kind && ref.APIVersion == owner.APIVersion {
			enqueue(cache.Key{Group: owner.Resource.Group, Resource: owner.Resource.Resource, Namespace: ev.Object.Key().Namespace, Name: ref.Name})
		}
	})
}

// controllerOf is obj's controller ownerReference, nil when it has none.
func controllerOf(obj *cache.Object) *metav1.OwnerReference {
	var m struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(obj.Raw(), &m); err != nil {
		return nil
	}
	return metav1.GetControllerOfNoCopy(&metav1.ObjectMeta{OwnerReferences: m.Metadata.OwnerReferences})
}

// Lister lists objects: the in-process client.
type Lister interface {
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
}

// listOwned lists the objects of gr in namespace that sel selects and whose controller is
// the object of uid, decoding each with decode.
func listOwned[T any](ctx context.Context, c Lister, gr cache.GroupResource, namespace string, sel labels.Selector, uid string, decode func(*cache.Object) (T, error)) ([]T, error) {
	l, err := c.List(ctx, gr, cache.InNamespace(namespace), cache.MatchingLabels(sel))
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(l.Items))
	for _, o := range l.Items {
		if !bytes.Contains(o.Raw(), []byte(uid)) {
			continue
		}
		if ref := controllerOf(o); ref == nil || string(ref.UID) != uid {
			continue
		}
		v, err := decode(o)
		if err != nil {
			continue
		}
		out = append(out, v)
	}
	return out, nil
}

// controllerRef is the controller ownerReference of a child of owner's object (name, uid):
// controller and blockOwnerDeletion, so the garbage collector deletes the child with it and a
// foreground delete of the owner waits for it.
func controllerRef(owner Owner, name, uid string) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{APIVersion: owner.APIVersion, Kind: owner.Kind, Name: name, UID: types.UID(uid), Controller: &t, BlockOwnerDeletion: &t}
}
