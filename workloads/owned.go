package workloads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"

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
// informers' event handlers do in kube-controller-manager. An orphan (no controller) that is
// not being deleted enqueues every owner in its namespace whose selector selects it, so that
// one adopts it, when w can list (the store, the in-process client). A watch that ends early
// (it fell behind) is opened again; enqueue may report false (the controller is not running).
func FollowChildren(ctx context.Context, w Watcher, children cache.GroupResource, owner Owner, enqueue func(cache.Key) bool) {
	needle := []byte(`"kind":"` + owner.Kind + `"`)
	lister, _ := w.(Lister)
	cache.Follow(ctx, w, cache.WatchOptions{Resources: []cache.GroupResource{children}}, func(ev cache.Event) {
		if ev.Object == nil {
			return
		}
		if !bytes.Contains(ev.Object.Raw(), []byte(`"controller":true`)) {
			if lister != nil && ev.Type != cache.Deleted && !ev.Object.Deleting() {
				enqueueSelecting(ctx, lister, owner, ev.Object, enqueue)
			}
			return
		}
		if !bytes.Contains(ev.Object.Raw(), needle) {
			return // no reference to an owner of that kind: nothing to decode
		}
		if ref := controllerOf(ev.Object); ref != nil && ref.Kind == owner.Kind && ref.APIVersion == owner.APIVersion {
			enqueue(cache.Key{Group: owner.Resource.Group, Resource: owner.Resource.Resource, Namespace: ev.Object.Key().Namespace, Name: ref.Name})
		} else if ref == nil && lister != nil && ev.Type != cache.Deleted && !ev.Object.Deleting() {
			enqueueSelecting(ctx, lister, owner, ev.Object, enqueue)
		}
	})
}

// enqueueSelecting enqueues the owners in child's namespace whose spec.selector selects it,
// as kube's controllers look for the controllers of an orphan (getPodReplicaSets, ...).
func enqueueSelecting(ctx context.Context, l Lister, owner Owner, child *cache.Object, enqueue func(cache.Key) bool) {
	ns := child.Key().Namespace
	list, err := l.List(ctx, owner.Resource, cache.InNamespace(ns))
	if err != nil {
		return
	}
	have := child.Labels()
	for _, o := range list.Items {
		var m struct {
			Spec struct {
				Selector *metav1.LabelSelector `json:"selector"`
			} `json:"spec"`
		}
		if json.Unmarshal(o.Raw(), &m) != nil || m.Spec.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(m.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(have) {
			continue
		}
		enqueue(o.Key())
	}
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

// claim says how claimOwned claims a controller's children.
type claim struct {
	// Children is the resource of the children, listed in the owner's namespace.
	Children cache.GroupResource
	// Owner is the controller's kind; Obj the controller as read.
	Owner Owner
	Obj   *cache.Object
	// Selector selects its children.
	Selector labels.Selector
	// Adoptable, when set, must accept an orphan for it to be adopted (a ReplicaSet adopts
	// only active Pods, a StatefulSet only its members).
	Adoptable func(*cache.Object) bool
	// Finalizer, when set, is added to an adopted child and removed from a released one (the
	// Job controller's tracking finalizer).
	Finalizer string
}

// claimOwned is kube's ControllerRefManager (ClaimPods, ClaimReplicaSets) for the controller
// of cl, which k8s.io/kubernetes keeps unimportable: of the objects of cl.Children in its
// namespace that its selector selects, those it controls are its and orphans are adopted (a
// controller reference with blockOwnerDeletion added by a strategic merge patch conditional on
// their uid, as kube's patch) unless it or they are being deleted; those it controlled at its
// last pass (mem) that its selector no longer selects are released (the reference removed the
// same way) unless it is being deleted. Listing by the selector keeps a pass as cheap as before
// adoption; kube lists the whole namespace from its informer's cache instead. It returns its
// children (the adopted ones as patched), decoded; one that cannot be decoded is skipped, one
// gone meanwhile is not an error.
func claimOwned[T any](ctx context.Context, c Client, mem *claims, cl claim, decode func(*cache.Object) (T, error)) ([]T, error) {
	k := cl.Obj.Key()
	l, err := c.List(ctx, cl.Children, cache.InNamespace(k.Namespace), cache.MatchingLabels(cl.Selector))
	if err != nil {
		return nil, err
	}
	uid := cl.Obj.UID()
	owned := make(map[cache.Key]struct{}, len(l.Items))
	out := make([]T, 0, len(l.Items))
	for _, o := range l.Items {
		var ref *metav1.OwnerReference
		if bytes.Contains(o.Raw(), []byte(`"controller":true`)) {
			ref = controllerOf(o)
		}
		switch {
		case ref != nil && string(ref.UID) == uid:
		case ref == nil && !cl.Obj.Deleting() && !o.Deleting() && (cl.Adoptable == nil || cl.Adoptable(o)):
			adopted, err := adoptChild(ctx, c, cl, o)
			if err != nil {
				return nil, err
			}
			if adopted == nil {
				continue
			}
			o = adopted
		default:
			continue
		}
		owned[o.Key()] = struct{}{}
		v, err := decode(o)
		if err != nil {
			continue
		}
		out = append(out, v)
	}
	for _, key := range mem.swap(k, owned) {
		if cl.Obj.Deleting() {
			break
		}
		o, err := c.Get(ctx, key)
		if errors.Is(err, cache.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if ref := controllerOf(o); ref == nil || string(ref.UID) != uid || cl.Selector.Matches(o.Labels()) {
			continue
		}
		if err := releaseChild(ctx, c, cl, o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// claims remembers, per controller, the children it controlled at its last pass: how a pass
// finds the ones relabelled out of its selector without listing the namespace. Safe for
// concurrent use; the zero value is not (newClaims).
type claims struct {
	mu    sync.Mutex
	owned map[cache.Key]map[cache.Key]struct{}
}

func newClaims() *claims { return &claims{owned: map[cache.Key]map[cache.Key]struct{}{}} }

// swap records now as the children of the controller at owner and returns those it had that
// now lacks.
func (m *claims) swap(owner cache.Key, now map[cache.Key]struct{}) []cache.Key {
	m.mu.Lock()
	defer m.mu.Unlock()
	var gone []cache.Key
	for k := range m.owned[owner] {
		if _, ok := now[k]; !ok {
			gone = append(gone, k)
		}
	}
	m.owned[owner] = now
	return gone
}

// forget drops what is remembered of the controller at owner (it is gone).
func (m *claims) forget(owner cache.Key) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.owned, owner)
}

// adoptChild adds the controller reference of cl's controller to o (and cl.Finalizer), as
// kube's AdoptPod and AdoptReplicaSet patch it. It returns o as patched, nil when it is gone.
func adoptChild(ctx context.Context, c Client, cl claim, o *cache.Object) (*cache.Object, error) {
	ref := controllerRef(cl.Owner, cl.Obj.Key().Name, cl.Obj.UID())
	md := map[string]any{"ownerReferences": []metav1.OwnerReference{ref}, "uid": o.UID()}
	if cl.Finalizer != "" {
		md["finalizers"] = []string{cl.Finalizer}
	}
	return patchChild(ctx, c, o, md)
}

// releaseChild removes the reference to cl's controller from o (and cl.Finalizer), as kube's
// ReleasePod and ReleaseReplicaSet patch it.
func releaseChild(ctx context.Context, c Client, cl claim, o *cache.Object) error {
	md := map[string]any{"ownerReferences": []map[string]any{{"$patch": "delete", "uid": cl.Obj.UID()}}, "uid": o.UID()}
	if cl.Finalizer != "" {
		md["$deleteFromPrimitiveList/finalizers"] = []string{cl.Finalizer}
	}
	_, err := patchChild(ctx, c, o, md)
	return err
}

// patchChild applies a strategic merge patch of o's metadata; nil, nil when o is gone.
func patchChild(ctx context.Context, c Client, o *cache.Object, metadata map[string]any) (*cache.Object, error) {
	body, err := json.Marshal(map[string]any{"metadata": metadata})
	if err != nil {
		return nil, err
	}
	patched, err := c.Patch(ctx, o.Key(), "", "application/strategic-merge-patch+json", body)
	if errors.Is(err, cache.ErrNotFound) {
		return nil, nil
	}
	return patched, err
}
