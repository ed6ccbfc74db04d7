package workloads

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const deploymentSource = "deployment-controller"

// Deployments rolls Deployments out (status only). Its rollout, per pass:
//   - a new generation is observed at once: status.observedGeneration, status.replicas set to
//     spec.replicas; a new pod template (named like kube's new ReplicaSet, <name>-<hash>) starts
//     updatedReplicas from 0 (the old pods stay ready while the new ones replace them; with the
//     Recreate strategy the old ones go first), the first one and a scale of the same template
//     keep every pod up to date; a scale down is immediate;
//   - then one step every RolloutStep: updatedReplicas and readyReplicas move toward
//     spec.replicas by ceil(max(current, desired)/4), at least 1; availableReplicas follows
//     readyReplicas (minReadySeconds is not waited for);
//   - conditions as kube-controller-manager sets them: Available (MinimumReplicasAvailable
//     when availableReplicas reaches spec.replicas less maxUnavailable, else
//     MinimumReplicasUnavailable), Progressing (NewReplicaSetCreated, ReplicaSetUpdated,
//     NewReplicaSetAvailable). The Progressing message names the template's replica set, which
//     is how a later pass tells a new template from a scale, with nothing kept in memory.
//
// spec.paused holds the rollout where it is; progressDeadlineSeconds never runs out.
type Deployments struct {
	cfg Config
	pacer
}

var (
	_ reconciler.Reconciler = (*Deployments)(nil)
	_ reconciler.Scheduler  = (*Deployments)(nil)
)

// NewDeployments returns the Deployment simulator.
func NewDeployments(cfg Config) *Deployments { return &Deployments{cfg: cfg.withDefaults()} }

// Reconcile does the next due step of the Deployment at key.
func (r *Deployments) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	now := r.cfg.Clock.Now()
	var d appsv1.Deployment
	obj, _, res, err := r.begin(ctx, r.cfg.Client, key, &d, now, nil)
	if obj == nil {
		return res, err
	}
	desired := int32(1)
	if d.Spec.Replicas != nil {
		desired = *d.Spec.Replicas
	}
	st := *d.Status.DeepCopy()
	rs := d.Name + "-" + templateHash(d.Spec.Template)
	progressing := deploymentCondition(st, appsv1.DeploymentProgressing)
	newTemplate := progressing == nil || !strings.Contains(progressing.Message, `"`+rs+`"`)
	recreate := d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType
	step := r.cfg.RolloutStep
	var next time.Time
	var event string

	if st.ObservedGeneration != d.Generation || newTemplate {
		from := st.Replicas
		st.ObservedGeneration = d.Generation
		switch {
		case newTemplate:
			st.Replicas, st.UpdatedReplicas = desired, 0
			if progressing == nil || recreate {
				// Nothing to replace (the first template), or the old pods go first.
				st.UpdatedReplicas = desired
				st.ReadyReplicas = 0
			}
			setDeploymentCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetCreated",
				fmt.Sprintf("Created new replica set %q", rs), now, true)
			event = fmt.Sprintf("Scaled up replica set %s from 0 to %d", rs, desired)
		case from != desired:
			if st.UpdatedReplicas >= from {
				st.UpdatedReplicas = desired // every pod was up to date: so are the new ones
			}
			st.Replicas, st.UpdatedReplicas = desired, min(st.UpdatedReplicas, desired)
			st.ReadyReplicas = min(st.ReadyReplicas, desired)
			verb := "up"
			if desired < from {
				verb = "down"
			}
			event = fmt.Sprintf("Scaled %s replica set %s from %d to %d", verb, rs, from, desired)
		}
		if step > 0 && !deploymentDone(st, desired) {
			next = now.Add(step)
		}
	}
	if next.IsZero() && !deploymentDone(st, desired) && !d.Spec.Paused {
		if step == 0 {
			st.Replicas, st.UpdatedReplicas, st.ReadyReplicas = desired, desired, desired
		} else {
			delta := stepSize(max(st.ReadyReplicas, st.UpdatedReplicas), desired)
			st.Replicas = desired
			st.UpdatedReplicas = toward(st.UpdatedReplicas, desired, delta)
			st.ReadyReplicas = toward(st.ReadyReplicas, desired, delta)
			if !deploymentDone(st, desired) {
				next = now.Add(step)
			}
		}
		setDeploymentCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "ReplicaSetUpdated",
			fmt.Sprintf("ReplicaSet %q is progressing.", rs), now, true)
	}
	if d.Spec.Paused {
		next = time.Time{}
	}
	st.AvailableReplicas = st.ReadyReplicas
	st.UnavailableReplicas = max(st.Replicas-st.AvailableReplicas, 0)
	if st.AvailableReplicas >= desired-maxUnavailable(d, desired) {
		setDeploymentCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability.", now, false)
	} else {
		setDeploymentCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", now, false)
	}
	if deploymentDone(st, desired) {
		setDeploymentCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable",
			fmt.Sprintf("ReplicaSet %q has successfully progressed.", rs), now, false)
	}
	sortDeploymentConditions(st.Conditions)
	res = r.schedule(key, next, now)
	if equalJSON(st, d.Status) {
		return res, nil
	}
	if err := writeStatus(ctx, r.cfg.Client, obj, st); err != nil {
		return reconciler.Result{}, err
	}
	if event != "" {
		record(ctx, r.cfg, obj, "apps/v1", "Deployment", deploymentSource, "ScalingReplicaSet", event)
	}
	return res, nil
}

// deploymentDone is kube's DeploymentComplete: every replica updated and available, no other.
func deploymentDone(st appsv1.DeploymentStatus, desired int32) bool {
	return st.UpdatedReplicas == desired && st.Replicas == desired && st.ReadyReplicas == desired
}

// maxUnavailable is kube's MaxUnavailable: the rolling update's maxUnavailable scaled to
// desired (rounded down; 1 when it and maxSurge both come to 0), none for Recreate.
func maxUnavailable(d appsv1.Deployment, desired int32) int32 {
	ru := d.Spec.Strategy.RollingUpdate
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || ru == nil || desired == 0 {
		return 0
	}
	pct := intstr.FromString("25%")
	surgeV, unavailV := ru.MaxSurge, ru.MaxUnavailable
	if surgeV == nil {
		surgeV = &pct
	}
	if unavailV == nil {
		unavailV = &pct
	}
	surge, err1 := intstr.GetScaledValueFromIntOrPercent(surgeV, int(desired), true)
	unavail, err2 := intstr.GetScaledValueFromIntOrPercent(unavailV, int(desired), false)
	if err1 != nil || err2 != nil {
		return 0
	}
	if surge == 0 && unavail == 0 {
		unavail = 1
	}
	return min(int32(unavail), desired)
}

func deploymentCondition(st appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setDeploymentCondition sets a condition as kube's SetDeploymentCondition does:
// lastTransitionTime moves only when the status changes, lastUpdateTime when anything does,
// or on every call with touch (a rollout that made progress).
func setDeploymentCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string, now time.Time, touch bool) {
	ts := metav1.NewTime(now.Truncate(time.Second))
	c := deploymentCondition(*st, t)
	if c == nil {
		st.Conditions = append(st.Conditions, appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: ts, LastTransitionTime: ts})
		return
	}
	if c.Status == status && c.Reason == reason && c.Message == msg && !touch {
		return
	}
	if c.Status != status {
		c.LastTransitionTime = ts
	}
	c.Status, c.Reason, c.Message, c.LastUpdateTime = status, reason, msg, ts
}

// sortDeploymentConditions puts Available before Progressing, as kube's status shows them.
func sortDeploymentConditions(cs []appsv1.DeploymentCondition) {
	if len(cs) == 2 && cs[0].Type == appsv1.DeploymentProgressing && cs[1].Type == appsv1.DeploymentAvailable {
		cs[0], cs[1] = cs[1], cs[0]
	}
}
