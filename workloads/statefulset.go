package workloads

import (
	"context"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	appsv1 "k8s.io/api/apps/v1"
)

// StatefulSets rolls StatefulSets out (status only), with the fields kube's StatefulSet
// controller sets (it sets no conditions):
//   - a new generation is observed at once: observedGeneration, replicas set to spec.replicas;
//     a new pod template is a new updateRevision (<name>-<hash>); on the first one every pod
//     is at it (currentRevision too), on a later one updatedReplicas starts from 0; a scale
//     down is immediate;
//   - then one step every RolloutStep: readyReplicas moves toward spec.replicas, and with the
//     RollingUpdate strategy updatedReplicas toward spec.replicas less the partition, by
//     ceil(max(current, desired)/4), at least 1; once every pod is updated, currentRevision
//     becomes updateRevision. availableReplicas follows readyReplicas. With OnDelete nothing
//     is updated (no pod is ever deleted here).
type StatefulSets struct {
	cfg Config
	pacer
}

var (
	_ reconciler.Reconciler = (*StatefulSets)(nil)
	_ reconciler.Scheduler  = (*StatefulSets)(nil)
)

// NewStatefulSets returns the StatefulSet simulator.
func NewStatefulSets(cfg Config) *StatefulSets { return &StatefulSets{cfg: cfg.withDefaults()} }

// Reconcile does the next due step of the StatefulSet at key.
func (r *StatefulSets) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	now := r.cfg.Clock.Now()
	var s appsv1.StatefulSet
	obj, _, res, err := r.begin(ctx, r.cfg.Client, key, &s, now, nil)
	if obj == nil {
		return res, err
	}
	desired := int32(1)
	if s.Spec.Replicas != nil {
		desired = *s.Spec.Replicas
	}
	// target is how many pods a rolling update brings to the new revision.
	target := desired
	if u := s.Spec.UpdateStrategy; u.Type == appsv1.OnDeleteStatefulSetStrategyType {
		target = -1
	} else if u.RollingUpdate != nil && u.RollingUpdate.Partition != nil {
		target = max(desired-*u.RollingUpdate.Partition, 0)
	}
	st := *s.Status.DeepCopy()
	rev := s.Name + "-" + templateHash(s.Spec.Template)
	step := r.cfg.RolloutStep
	var next time.Time

	if st.ObservedGeneration != s.Generation || st.UpdateRevision != rev {
		st.ObservedGeneration = s.Generation
		switch {
		case st.CurrentRevision == "":
			st.CurrentRevision, st.UpdateRevision = rev, rev
			st.Replicas, st.CurrentReplicas, st.UpdatedReplicas, st.ReadyReplicas = desired, desired, desired, 0
		case st.UpdateRevision != rev:
			st.UpdateRevision, st.UpdatedReplicas = rev, 0
			if st.CurrentRevision == rev { // back to the current template
				st.UpdatedReplicas = st.CurrentReplicas
			}
		}
		st.Replicas = desired
		st.ReadyReplicas = min(st.ReadyReplicas, desired)
		st.UpdatedReplicas = min(st.UpdatedReplicas, desired)
		st.CurrentReplicas = min(st.CurrentReplicas, desired)
		if st.CurrentRevision == st.UpdateRevision { // a scale: every pod is at the revision
			st.CurrentReplicas, st.UpdatedReplicas = desired, desired
		}
		if step > 0 && !statefulSetDone(st, desired, target) {
			next = now.Add(step)
		}
	}
	if next.IsZero() && !statefulSetDone(st, desired, target) {
		delta := stepSize(st.ReadyReplicas, desired)
		if step == 0 {
			delta = max(desired, 1)
		}
		st.Replicas = desired
		st.ReadyReplicas = toward(st.ReadyReplicas, desired, delta)
		if st.UpdatedReplicas < target {
			st.UpdatedReplicas = toward(st.UpdatedReplicas, target, delta)
		}
		if st.CurrentRevision == st.UpdateRevision {
			st.CurrentReplicas = desired
			st.UpdatedReplicas = desired
		} else {
			st.CurrentReplicas = desired - st.UpdatedReplicas
		}
		if !statefulSetDone(st, desired, target) && step > 0 {
			next = now.Add(step)
		}
	}
	if st.UpdatedReplicas == desired && st.CurrentRevision != st.UpdateRevision {
		st.CurrentRevision, st.CurrentReplicas = st.UpdateRevision, st.UpdatedReplicas
	}
	st.AvailableReplicas = st.ReadyReplicas
	res = r.schedule(key, next, now)
	if equalJSON(st, s.Status) {
		return res, nil
	}
	return res, writeStatus(ctx, r.cfg.Client, obj, st)
}

// statefulSetDone: every pod ready, and the rolling update (target pods; -1 for OnDelete) done.
func statefulSetDone(st appsv1.StatefulSetStatus, desired, target int32) bool {
	return st.Replicas == desired && st.ReadyReplicas == desired && (target < 0 || st.UpdatedReplicas >= target)
}
