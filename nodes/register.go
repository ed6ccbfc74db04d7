package nodes

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/opemu/opemu/cache"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Register creates the Nodes that do not exist, each Ready with its Lease, and returns once
// they all exist. A Node that exists is kept as it is (the heartbeat brings its status up to
// date); every replica sharing a store may call it.
func (n *Nodes) Register(ctx context.Context) error {
	for i, name := range n.names {
		created, err := n.register(ctx, i)
		if err != nil {
			return fmt.Errorf("nodes: registering %s: %w", name, err)
		}
		if created == nil {
			continue
		}
		if _, err := n.renew(ctx, name, created.UID()); err != nil {
			return fmt.Errorf("nodes: the Lease of %s: %w", name, err)
		}
	}
	return nil
}

// register creates the i-th Node, then takes the not-ready taint the create got off it, as the
// node lifecycle controller does once it sees the Node Ready. It returns the Node, or nil when
// it existed.
func (n *Nodes) register(ctx context.Context, i int) (*cache.Object, error) {
	name := n.names[i]
	obj, err := toMap(n.node(i, metav1.NewTime(n.cfg.Clock.Now())))
	if err != nil {
		return nil, err
	}
	if _, err := n.cfg.Client.Get(ctx, nodeKey(name)); err == nil {
		return nil, nil // it exists: nothing is written (a full etcd refuses every write)
	}
	stored, err := n.cfg.Client.Create(ctx, nodeKey(name), obj)
	if errors.Is(err, cache.ErrAlreadyExists) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var node corev1.Node
	if err := decode(stored, &node); err != nil {
		return nil, err
	}
	notReady := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	i = slices.IndexFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&notReady) })
	if i < 0 {
		return stored, nil
	}
	node.Spec.Taints = slices.Delete(node.Spec.Taints, i, i+1)
	if obj, err = toMap(&node); err != nil {
		return nil, err
	}
	return n.cfg.Client.Update(ctx, nodeKey(name), obj)
}
