package workloads

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const replicaSetSource = "replicaset-controller"

// ReplicaSets is kube-controller-manager's ReplicaSet controller: each pass lists the Pods
// the ReplicaSet controls (its selector, and a controller ownerReference to its uid), creates
// the missing ones from its template (generateName <name>-, the template's labels and
// annotations, a controller ownerReference with blockOwnerDeletion, so the garbage collector
// takes them with it) or deletes the surplus (those least far along first: unbound, pending,
// not ready, the newest), with kube's SuccessfulCreate and SuccessfulDelete Events, and
// writes its status from them: replicas, fullyLabeledReplicas, readyReplicas,
// availableReplicas (Ready for minReadySeconds, on the clock), observedGeneration. A Pod's
// change enqueues its ReplicaSet (FollowChildren). Orphans are not adopted.
type ReplicaSets struct {
	cfg Config
}

var _ reconciler.Reconciler = (*ReplicaSets)(nil)

// NewReplicaSets returns the ReplicaSet controller.
func NewReplicaSets(cfg Config) *ReplicaSets { return &ReplicaSets{cfg: cfg.withDefaults()} }

// Reconcile brings the ReplicaSet at key to its replicas and writes its status.
func (r *ReplicaSets) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	var rs appsv1.ReplicaSet
	obj, gone, err := read(ctx, r.cfg.Client, key, &rs)
	if gone {
		r.cfg.claims.forget(key)
	}
	if gone || err != nil {
		return reconciler.Result{}, err
	}
	sel, err := metav1.LabelSelectorAsSelector(rs.Spec.Selector)
	if err != nil {
		return reconciler.Result{}, reconciler.TerminalError(err)
	}
	pods, err := claimOwned(ctx, r.cfg.Client, r.cfg.claims, claim{Children: PodResource, Owner: ReplicaSetOwner, Obj: obj, Selector: sel, Adoptable: activePod}, decodePod)
	if err != nil {
		return reconciler.Result{}, err
	}
	terminating := int32(0)
	for _, p := range pods {
		if p.DeletionTimestamp != nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			terminating++
		}
	}
	active := slices.DeleteFunc(pods, func(p *corev1.Pod) bool { return !podActive(p) })
	want := int(ptrOr(rs.Spec.Replicas, 1))
	var manageErr error
	if !obj.Deleting() {
		active, manageErr = r.manage(ctx, obj, &rs, active, want)
	}
	now := r.cfg.Clock.Now()
	st, wait := replicaSetStatus(&rs, active, now)
	st.TerminatingReplicas = &terminating
	if !equalJSON(st, rs.Status) {
		if err := writeStatus(ctx, r.cfg.Client, obj, st); err != nil {
			return reconciler.Result{}, err
		}
	}
	if manageErr != nil {
		return reconciler.Result{}, manageErr
	}
	return reconciler.Result{RequeueAfter: wait}, nil
}

// manage creates or deletes Pods until want are active, and returns the active Pods then.
func (r *ReplicaSets) manage(ctx context.Context, obj *cache.Object, rs *appsv1.ReplicaSet, active []*corev1.Pod, want int) ([]*corev1.Pod, error) {
	switch diff := len(active) - want; {
	case diff < 0:
		for range -diff {
			pod, err := r.createPod(ctx, obj, rs)
			if err != nil {
				return active, err
			}
			active = append(active, pod)
			record(ctx, r.cfg, obj, "apps/v1", "ReplicaSet", replicaSetSource, "SuccessfulCreate", "Created pod: "+pod.Name)
		}
	case diff > 0:
		slices.SortStableFunc(active, deletionOrder)
		for _, p := range active[:diff] {
			if err := deletePod(ctx, r.cfg.Client, p); err != nil {
				return active, err
			}
			record(ctx, r.cfg, obj, "apps/v1", "ReplicaSet", replicaSetSource, "SuccessfulDelete", "Deleted pod: "+p.Name)
		}
		active = active[diff:]
	}
	return active, nil
}

// createPod creates a Pod from rs's template, as kube's GetPodFromTemplate makes it.
func (r *ReplicaSets) createPod(ctx context.Context, obj *cache.Object, rs *appsv1.ReplicaSet) (*corev1.Pod, error) {
	return createPod(ctx, r.cfg.Client, podFromTemplate(&rs.Spec.Template, rs.Namespace, rs.Name+"-", controllerRef(ReplicaSetOwner, rs.Name, obj.UID())))
}

// replicaSetStatus is rs's status from its active Pods at now, and how long until a ready Pod
// becomes available (zero: none waits).
func replicaSetStatus(rs *appsv1.ReplicaSet, active []*corev1.Pod, now time.Time) (appsv1.ReplicaSetStatus, time.Duration) {
	st := appsv1.ReplicaSetStatus{Replicas: int32(len(active)), ObservedGeneration: rs.Generation, Conditions: rs.Status.Conditions}
	var wait time.Duration
	for _, p := range active {
		if labelsMatch(rs.Spec.Template.Labels, p.Labels) {
			st.FullyLabeledReplicas++
		}
		ready := podReadyCondition(p)
		if ready == nil || ready.Status != corev1.ConditionTrue {
			continue
		}
		st.ReadyReplicas++
		if w := available(ready, rs.Spec.MinReadySeconds, now); w == 0 {
			st.AvailableReplicas++
		} else if wait == 0 || w < wait {
			wait = w
		}
	}
	return st, wait
}

// available is how long until a Pod Ready since ready's transition is available with
// minReadySeconds at now: zero when it is.
func available(ready *corev1.PodCondition, minReadySeconds int32, now time.Time) time.Duration {
	if minReadySeconds == 0 {
		return 0
	}
	at := ready.LastTransitionTime.Add(time.Duration(minReadySeconds) * time.Second)
	if !now.Before(at) {
		return 0
	}
	return at.Sub(now)
}

// deletionOrder sorts Pods the way kube's ReplicaSet controller picks the ones to delete
// first (ActivePods' ranking): unbound before bound, Pending before Running, not ready
// before ready, then the most recently made.
func deletionOrder(a, b *corev1.Pod) int {
	rank := func(p *corev1.Pod) (int, int, int) {
		bound, running, ready := 0, 0, 0
		if p.Spec.NodeName != "" {
			bound = 1
		}
		if p.Status.Phase == corev1.PodRunning {
			running = 1
		}
		if c := podReadyCondition(p); c != nil && c.Status == corev1.ConditionTrue {
			ready = 1
		}
		return bound, running, ready
	}
	ab, ar, ay := rank(a)
	bb, br, by := rank(b)
	return cmp.Or(cmp.Compare(ab, bb), cmp.Compare(ar, br), cmp.Compare(ay, by),
		b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(b.Name, a.Name))
}

// podActive reports whether p counts toward its owner's replicas: not finished, not being
// deleted (kube's IsPodActive).
func podActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed && p.DeletionTimestamp == nil
}

// activePod is podActive of a stored Pod: the Pods a ReplicaSet claims (kube's
// FilterActivePods before ClaimPods).
func activePod(o *cache.Object) bool {
	p, err := decodePod(o)
	return err == nil && podActive(p)
}

// podReadyCondition is p's Ready condition, nil when it has none.
func podReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// labelsMatch reports whether have carries every label of want.
func labelsMatch(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

func decodePod(o *cache.Object) (*corev1.Pod, error) {
	var p corev1.Pod
	if err := decodeInto(o, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// decodeInto reads a stored object into its Go type.
func decodeInto(o *cache.Object, v any) error { return json.Unmarshal(o.Raw(), v) }

// toMap turns a typed object into the decoded JSON the client writes.
func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("workloads: %w", err)
	}
	return cache.DecodeJSON(raw)
}

func ptrOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}
