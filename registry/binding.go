package registry

import (
	"context"
	"fmt"
	"time"

	"github.com/opemu/opemu/cache"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Binding is a v1 Binding of a Pod to a Node (pods/binding): the Node's name, the annotations
// the binding adds to the Pod, and the Pod's uid and resourceVersion as preconditions (empty:
// none).
type Binding struct {
	Node            string
	Annotations     map[string]string
	UID             string
	ResourceVersion string
}

// bindingResource names a binding in its conflicts, as kube-apiserver does.
var bindingResource = schema.GroupResource{Resource: "pods/binding"}

// Bind assigns the Pod at key to b.Node, as kube-apiserver's binding storage does
// (assignPod): in one update, spec.nodeName set, the binding's annotations added and the
// PodScheduled condition True. A Pod being deleted or already bound is a 409 in kube's words.
func (s *Store) Bind(ctx context.Context, key cache.Key, b Binding, o Options) (*cache.Object, error) {
	t, err := s.TargetOf(key)
	if err != nil {
		return nil, err
	}
	if key.GroupResource() != (cache.GroupResource{Resource: "pods"}) {
		return nil, fmt.Errorf("registry: %s cannot be bound", key.GroupResource())
	}
	if b.Node == "" {
		return nil, apierrors.NewBadRequest("target.name: Required value")
	}
	now := s.now()
	return s.cfg.Storage.GuaranteedUpdate(ctx, key, cache.Preconditions{UID: b.UID, ResourceVersion: b.ResourceVersion}, func(cur *cache.Object) (cache.Update, error) {
		obj, err := cur.Decode()
		if err != nil {
			return cache.Update{}, err
		}
		if cur.Deleting() {
			return cache.Update{}, apierrors.NewConflict(bindingResource, key.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", key.Name))
		}
		spec, _ := obj["spec"].(map[string]any)
		if spec == nil {
			spec = map[string]any{}
			obj["spec"] = spec
		}
		if node, _ := spec["nodeName"].(string); node != "" {
			return cache.Update{}, apierrors.NewConflict(bindingResource, key.Name, fmt.Errorf("pod %s is already assigned to node %q", key.Name, node))
		}
		spec["nodeName"] = b.Node
		if len(b.Annotations) > 0 {
			md := metadataOf(obj)
			ann, _ := md["annotations"].(map[string]any)
			if ann == nil {
				ann = map[string]any{}
				md["annotations"] = ann
			}
			for k, v := range b.Annotations {
				ann[k] = v
			}
		}
		status, _ := obj["status"].(map[string]any)
		if status == nil {
			status = map[string]any{}
			obj["status"] = status
		}
		conds, _ := status["conditions"].([]any)
		scheduled := map[string]any{"type": "PodScheduled", "status": "True", "lastProbeTime": nil, "lastTransitionTime": now}
		replaced := false
		for i, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "PodScheduled" {
				if m["status"] == "True" {
					scheduled["lastTransitionTime"] = m["lastTransitionTime"]
				}
				conds[i], replaced = scheduled, true
			}
		}
		if !replaced {
			conds = append(conds, scheduled)
		}
		status["conditions"] = conds
		return cache.Update{Object: obj}, nil
	}, storeOptions(t.Kind, o))
}

// Bind assigns the Pod at key to a Node (Store.Bind): a scheduler's write.
func (c *Client) Bind(ctx context.Context, key cache.Key, b Binding) (*cache.Object, error) {
	start := time.Now()
	o, err := c.s.Bind(ctx, key, b, c.options())
	c.record(ctx, "create", key, "binding", start, o, err)
	return o, err
}
