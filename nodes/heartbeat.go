package nodes

import (
	"context"
	"errors"
	"time"

	"github.com/opemu/opemu/cache"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Run heartbeats for every Node until ctx is done: at once, then every RenewInterval on the
// clock. Only one process may run it for a store (the leader, when replicas share etcd).
func (n *Nodes) Run(ctx context.Context) error {
	if len(n.names) == 0 {
		return nil
	}
	t := n.cfg.Clock.NewTicker(RenewInterval)
	defer t.Stop()
	for {
		n.Beat(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		}
	}
}

// Beat is one heartbeat of every Node's kubelet: its status when due (Report), then its Lease.
// A Node that does not exist is skipped (it is not registered again), and so is one whose
// kubelet is stopped (KubeletAnnotation); a failed write waits for the next beat.
func (n *Nodes) Beat(ctx context.Context) {
	for _, name := range n.names {
		uid, err := n.report(ctx, name)
		if errors.Is(err, errStopped) {
			continue
		}
		if err == nil {
			_, err = n.renew(ctx, name, uid)
		}
		if err != nil && !errors.Is(err, cache.ErrNotFound) && ctx.Err() == nil {
			n.cfg.Logger.Debug("node heartbeat", "node", name, "err", err)
		}
	}
}

// errStopped is report's answer for a Node whose kubelet is stopped.
var errStopped = errors.New("the kubelet is stopped")

// report writes the Node's status when its conditions are not the ones its kubelet reports, or
// when the last report is ReportInterval old, and returns the Node's uid; errStopped when its
// kubelet is stopped (KubeletAnnotation), writing nothing.
func (n *Nodes) report(ctx context.Context, name string) (string, error) {
	obj, err := n.cfg.Client.Get(ctx, nodeKey(name))
	if err != nil {
		return "", err
	}
	var node corev1.Node
	if err := decode(obj, &node); err != nil {
		return "", err
	}
	state := node.Annotations[KubeletAnnotation]
	if state == KubeletStopped {
		return "", errStopped
	}
	ready := state != KubeletNotReady
	now := metav1.NewTime(n.cfg.Clock.Now())
	if !n.due(node.Status.Conditions, now.Time, ready) {
		return obj.UID(), nil
	}
	node.Status.Conditions = merge(node.Status.Conditions, conditions(now, ready))
	body, err := toMap(&node)
	if err != nil {
		return "", err
	}
	_, err = n.cfg.Client.UpdateStatus(ctx, nodeKey(name), body)
	return obj.UID(), err
}

// due reports whether a kubelet would write these conditions at now: one it reports (ready or
// not) is missing or says otherwise, or its Ready heartbeat is ReportInterval old.
func (n *Nodes) due(have []corev1.NodeCondition, now time.Time, ready bool) bool {
	for _, want := range conditions(metav1.Time{}, ready) {
		c := condition(have, want.Type)
		if c == nil || c.Status != want.Status || c.Reason != want.Reason || c.Message != want.Message {
			return true
		}
		if want.Type == corev1.NodeReady && now.Sub(c.LastHeartbeatTime.Time) >= ReportInterval {
			return true
		}
	}
	return false
}

// merge is have with each condition of want in place of its type's: the heartbeat moves, the
// transition time only when the status changes. Conditions of other types are kept.
func merge(have, want []corev1.NodeCondition) []corev1.NodeCondition {
	out := append([]corev1.NodeCondition(nil), have...)
	for _, w := range want {
		c := condition(out, w.Type)
		if c == nil {
			out = append(out, w)
			continue
		}
		if c.Status == w.Status {
			w.LastTransitionTime = c.LastTransitionTime
		}
		*c = w
	}
	return out
}

func condition(cs []corev1.NodeCondition, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// renew renews the Node's Lease (renewTime now), creating it when it is missing, owned by the
// Node of uid.
func (n *Nodes) renew(ctx context.Context, name, uid string) (*cache.Object, error) {
	now := n.cfg.Clock.Now()
	obj, err := n.cfg.Client.Get(ctx, leaseKey(name))
	if errors.Is(err, cache.ErrNotFound) {
		body, err := toMap(lease(name, uid, now))
		if err != nil {
			return nil, err
		}
		return n.cfg.Client.Create(ctx, leaseKey(name), body)
	}
	if err != nil {
		return nil, err
	}
	var l coordinationv1.Lease
	if err := decode(obj, &l); err != nil {
		return nil, err
	}
	fresh := lease(name, uid, now)
	l.Spec = fresh.Spec
	if len(l.OwnerReferences) == 0 || l.OwnerReferences[0].UID != types.UID(uid) {
		l.OwnerReferences = fresh.OwnerReferences
	}
	body, err := toMap(&l)
	if err != nil {
		return nil, err
	}
	return n.cfg.Client.Update(ctx, leaseKey(name), body)
}
