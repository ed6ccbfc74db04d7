package workloads

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const deploymentSource = "deployment-controller"

// The annotations kube's Deployment controller keeps on its ReplicaSets and Deployments.
const (
	RevisionAnnotation        = "deployment.kubernetes.io/revision"
	RevisionHistoryAnnotation = "deployment.kubernetes.io/revision-history"
	DesiredReplicasAnnotation = "deployment.kubernetes.io/desired-replicas"
	MaxReplicasAnnotation     = "deployment.kubernetes.io/max-replicas"
	// revisionHistoryChars bounds the revision-history annotation, as kube's
	// maxRevHistoryLengthInChars.
	revisionHistoryChars = 2000
)

// annotationsNotCopied are the Deployment's annotations its ReplicaSets do not get.
var annotationsNotCopied = map[string]bool{
	corev1.LastAppliedConfigAnnotation: true, RevisionAnnotation: true, RevisionHistoryAnnotation: true,
	DesiredReplicasAnnotation: true, MaxReplicasAnnotation: true, appsv1.DeprecatedRollbackTo: true,
}

// Deployments is kube-controller-manager's Deployment controller (pkg/controller/deployment),
// written again pass for pass: each pass lists the ReplicaSets the Deployment controls (its
// selector, a controller ownerReference to its uid) and
//   - being deleted: writes its status only;
//   - paused, or scaled (a desired-replicas annotation of an active ReplicaSet differs): scales
//     the active ReplicaSets (proportionally during a rolling update), and paused, removes the
//     old ReplicaSets beyond revisionHistoryLimit;
//   - else rolls out by its strategy: RollingUpdate makes the new ReplicaSet (<name>-<pod-template-hash>,
//     revision one past the old ones', the template's labels with pod-template-hash) and
//     scales it up within maxSurge, then the old ones down within maxUnavailable; Recreate
//     scales the old ones to 0, waits for their Pods to go, then scales the new one up. A
//     template equal to an old ReplicaSet's (kubectl rollout undo) makes that one new again,
//     with the next revision. Once complete, old ReplicaSets beyond revisionHistoryLimit go.
//
// Its status is computed from the ReplicaSets (replicas, updated, ready, available,
// unavailable, terminating), with kube's Available and Progressing conditions and its
// ScalingReplicaSet Events. The Deployment's revision annotation follows its new ReplicaSet's.
// A ReplicaSet's change enqueues its Deployment (FollowChildren). progressDeadlineSeconds never
// runs out; orphaned ReplicaSets its selector selects are adopted.
type Deployments struct {
	cfg Config
}

var _ reconciler.Reconciler = (*Deployments)(nil)

// NewDeployments returns the Deployment controller.
func NewDeployments(cfg Config) *Deployments { return &Deployments{cfg: cfg.withDefaults()} }

// deploymentPass is one pass over a Deployment: the object as last read or written, typed.
type deploymentPass struct {
	r   *Deployments
	obj *cache.Object
	d   *appsv1.Deployment
}

// Reconcile does what kube's syncDeployment does for the Deployment at key.
func (r *Deployments) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	var d appsv1.Deployment
	obj, gone, err := read(ctx, r.cfg.Client, key, &d)
	if gone {
		r.cfg.claims.forget(key)
	}
	if gone || err != nil {
		return reconciler.Result{}, err
	}
	p := &deploymentPass{r: r, obj: obj, d: &d}
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = new(int32(1))
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || sel.Empty() {
		return reconciler.Result{}, nil // kube's controller selects nothing for an empty selector
	}
	rsList, err := claimOwned(ctx, r.cfg.Client, r.cfg.claims, claim{Children: ReplicaSetResource, Owner: DeploymentOwner, Obj: obj, Selector: sel}, decodeReplicaSet)
	if err != nil {
		return reconciler.Result{}, err
	}
	switch {
	case obj.Deleting():
		newRS, oldRSs, err := p.allReplicaSets(ctx, rsList, false)
		if err != nil {
			return reconciler.Result{}, err
		}
		return reconciler.Result{}, p.syncStatus(ctx, append(oldRSs, newRS), newRS)
	}
	if err := p.pausedConditions(ctx); err != nil {
		return reconciler.Result{}, err
	}
	if d.Spec.Paused || p.scalingEvent(rsList) {
		return reconciler.Result{}, p.sync(ctx, rsList)
	}
	if d.Spec.Strategy.Type == appsv1.RecreateDeploymentStrategyType {
		return reconciler.Result{}, p.recreate(ctx, rsList)
	}
	return reconciler.Result{}, p.rolling(ctx, rsList)
}

// sync scales the Deployment's ReplicaSets and, paused, cleans up (kube's sync).
func (p *deploymentPass) sync(ctx context.Context, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := p.allReplicaSets(ctx, rsList, false)
	if err != nil {
		return err
	}
	if err := p.scale(ctx, newRS, oldRSs); err != nil {
		return err
	}
	if p.d.Spec.Paused {
		if err := p.cleanup(ctx, oldRSs); err != nil {
			return err
		}
	}
	return p.syncStatus(ctx, append(oldRSs, newRS), newRS)
}

// rolling is kube's rolloutRolling.
func (p *deploymentPass) rolling(ctx context.Context, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := p.allReplicaSets(ctx, rsList, true)
	if err != nil {
		return err
	}
	allRSs := append(slices.Clone(oldRSs), newRS)
	scaled, err := p.reconcileNew(ctx, allRSs, newRS)
	if err != nil {
		return err
	}
	if !scaled {
		if scaled, err = p.reconcileOld(ctx, allRSs, activeReplicaSets(oldRSs), newRS); err != nil {
			return err
		}
	}
	if !scaled && deploymentComplete(p.d, p.status(allRSs, newRS)) {
		if err := p.cleanup(ctx, oldRSs); err != nil {
			return err
		}
	}
	return p.syncRolloutStatus(ctx, allRSs, newRS)
}

// recreate is kube's rolloutRecreate.
func (p *deploymentPass) recreate(ctx context.Context, rsList []*appsv1.ReplicaSet) error {
	newRS, oldRSs, err := p.allReplicaSets(ctx, rsList, false)
	if err != nil {
		return err
	}
	allRSs := append(slices.Clone(oldRSs), newRS)
	scaled := false
	for _, rs := range activeReplicaSets(oldRSs) {
		s, err := p.scaleReplicaSet(ctx, rs, 0, false)
		if err != nil {
			return err
		}
		scaled = scaled || s
	}
	running := false
	for _, rs := range oldRSs {
		running = running || rs.Status.Replicas > 0 || ptrOr(rs.Status.TerminatingReplicas, 0) > 0
	}
	if scaled || running {
		return p.syncRolloutStatus(ctx, allRSs, newRS)
	}
	if newRS == nil {
		if newRS, oldRSs, err = p.allReplicaSets(ctx, rsList, true); err != nil {
			return err
		}
		allRSs = append(slices.Clone(oldRSs), newRS)
	}
	if _, err := p.scaleReplicaSet(ctx, newRS, *p.d.Spec.Replicas, false); err != nil {
		return err
	}
	if deploymentComplete(p.d, p.status(allRSs, newRS)) {
		if err := p.cleanup(ctx, oldRSs); err != nil {
			return err
		}
	}
	return p.syncRolloutStatus(ctx, allRSs, newRS)
}

// reconcileNew scales the new ReplicaSet toward the Deployment's replicas within maxSurge.
func (p *deploymentPass) reconcileNew(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	want := *p.d.Spec.Replicas
	switch have := *newRS.Spec.Replicas; {
	case have == want:
		return false, nil
	case have > want:
		return p.scaleReplicaSet(ctx, newRS, want, false)
	}
	n := newReplicas(p.d, allRSs, newRS)
	return p.scaleReplicaSet(ctx, newRS, n, false)
}

// reconcileOld scales the old ReplicaSets down within maxUnavailable, unhealthy ones first.
func (p *deploymentPass) reconcileOld(ctx context.Context, allRSs, oldRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) (bool, error) {
	if specReplicas(oldRSs) == 0 {
		return false, nil
	}
	minAvailable := *p.d.Spec.Replicas - maxUnavailable(*p.d)
	newUnavailable := *newRS.Spec.Replicas - newRS.Status.AvailableReplicas
	maxScaledDown := specReplicas(allRSs) - minAvailable - newUnavailable
	if maxScaledDown <= 0 {
		return false, nil
	}
	slices.SortStableFunc(oldRSs, byCreation)
	cleaned := int32(0)
	for _, rs := range oldRSs {
		if cleaned >= maxScaledDown {
			break
		}
		if *rs.Spec.Replicas == 0 || *rs.Spec.Replicas == rs.Status.AvailableReplicas {
			continue
		}
		n := min(maxScaledDown-cleaned, *rs.Spec.Replicas-rs.Status.AvailableReplicas)
		if _, err := p.scaleReplicaSet(ctx, rs, *rs.Spec.Replicas-n, false); err != nil {
			return false, err
		}
		cleaned += n
	}
	// Then the available ones, as far as minAvailable allows.
	available := int32(0)
	for _, rs := range allRSs {
		available += rs.Status.AvailableReplicas
	}
	scaledDown := int32(0)
	if available > minAvailable {
		total := available - minAvailable
		for _, rs := range oldRSs {
			if scaledDown >= total {
				break
			}
			if *rs.Spec.Replicas == 0 {
				continue
			}
			n := min(*rs.Spec.Replicas, total-scaledDown)
			if _, err := p.scaleReplicaSet(ctx, rs, *rs.Spec.Replicas-n, false); err != nil {
				return false, err
			}
			scaledDown += n
		}
	}
	return cleaned+scaledDown > 0, nil
}

// scale is kube's scale: the one active (or latest) ReplicaSet to the Deployment's replicas;
// with a saturated new one, the old ones to 0; else during a rolling update, every active one
// in proportion.
func (p *deploymentPass) scale(ctx context.Context, newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) error {
	d := p.d
	if rs := activeOrLatest(newRS, oldRSs); rs != nil {
		if *rs.Spec.Replicas == *d.Spec.Replicas {
			return nil
		}
		_, err := p.scaleReplicaSet(ctx, rs, *d.Spec.Replicas, false)
		return err
	}
	if saturated(d, newRS) {
		for _, rs := range activeReplicaSets(oldRSs) {
			if _, err := p.scaleReplicaSet(ctx, rs, 0, false); err != nil {
				return err
			}
		}
		return nil
	}
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return nil
	}
	all := activeReplicaSets(append(slices.Clone(oldRSs), newRS))
	allowed := int32(0)
	if *d.Spec.Replicas > 0 {
		allowed = *d.Spec.Replicas + maxSurge(*d)
	}
	toAdd := allowed - specReplicas(all)
	slices.SortStableFunc(all, func(a, b *appsv1.ReplicaSet) int {
		if c := cmp.Compare(*b.Spec.Replicas, *a.Spec.Replicas); c != 0 {
			return c
		}
		if toAdd > 0 {
			return -byCreation(a, b) // newer first
		}
		return byCreation(a, b)
	})
	sizes := make([]int32, len(all))
	added := int32(0)
	for i, rs := range all {
		sizes[i] = *rs.Spec.Replicas
		if toAdd != 0 {
			n := proportion(rs, *d, toAdd, added)
			sizes[i] += n
			added += n
		}
	}
	for i, rs := range all {
		if i == 0 && toAdd != 0 {
			sizes[i] = max(sizes[i]+toAdd-added, 0)
		}
		if _, err := p.scaleReplicaSet(ctx, rs, sizes[i], true); err != nil {
			return err
		}
	}
	return nil
}

// scaleReplicaSet sets rs's replicas to n and its replicas annotations, with the
// ScalingReplicaSet Event of a change of size; force writes the annotations even when the size
// is right. It reports whether the size changed.
func (p *deploymentPass) scaleReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet, n int32, force bool) (bool, error) {
	if !force && *rs.Spec.Replicas == n {
		return false, nil
	}
	d := p.d
	resize := *rs.Spec.Replicas != n
	desired, maxTotal := strconv.Itoa(int(*d.Spec.Replicas)), strconv.Itoa(int(*d.Spec.Replicas+maxSurge(*d)))
	if !resize && rs.Annotations[DesiredReplicasAnnotation] == desired && rs.Annotations[MaxReplicasAnnotation] == maxTotal {
		return false, nil
	}
	from := *rs.Spec.Replicas
	rs.Spec.Replicas = new(n)
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	rs.Annotations[DesiredReplicasAnnotation], rs.Annotations[MaxReplicasAnnotation] = desired, maxTotal
	if err := p.r.writeReplicaSet(ctx, rs); err != nil {
		return false, err
	}
	if resize {
		verb := "up"
		if n < from {
			verb = "down"
		}
		p.event(ctx, fmt.Sprintf("Scaled %s replica set %s from %d to %d", verb, rs.Name, from, n))
	}
	return resize, nil
}

// allReplicaSets is kube's getAllReplicaSetsAndSyncRevision: the new ReplicaSet (the one
// whose template is the Deployment's; made when create says so and there is none) with its
// revision one past the old ones', the old ones, and the Deployment's revision annotation and
// Progressing condition brought up to date.
func (p *deploymentPass) allReplicaSets(ctx context.Context, rsList []*appsv1.ReplicaSet, create bool) (*appsv1.ReplicaSet, []*appsv1.ReplicaSet, error) {
	d := p.d
	slices.SortStableFunc(rsList, byCreation)
	var newRS *appsv1.ReplicaSet
	var oldRSs []*appsv1.ReplicaSet
	for _, rs := range rsList {
		if newRS == nil && equalIgnoreHash(&rs.Spec.Template, &d.Spec.Template) {
			newRS = rs
			continue
		}
		oldRSs = append(oldRSs, rs)
	}
	maxOld := int64(0)
	for _, rs := range oldRSs {
		if v, err := strconv.ParseInt(rs.Annotations[RevisionAnnotation], 10, 64); err == nil {
			maxOld = max(maxOld, v)
		}
	}
	revision := strconv.FormatInt(maxOld+1, 10)
	if newRS != nil {
		changed := newReplicaSetAnnotations(d, newRS, revision, true)
		if changed || newRS.Spec.MinReadySeconds != d.Spec.MinReadySeconds {
			newRS.Spec.MinReadySeconds = d.Spec.MinReadySeconds
			return newRS, oldRSs, p.r.writeReplicaSet(ctx, newRS)
		}
		write := setAnnotation(d, RevisionAnnotation, newRS.Annotations[RevisionAnnotation])
		if deploymentCondition(d.Status, appsv1.DeploymentProgressing) == nil {
			setDeploymentCondition(&d.Status, appsv1.DeploymentProgressing, corev1.ConditionTrue, "FoundNewReplicaSet",
				fmt.Sprintf("Found new replica set %q", newRS.Name), p.now())
			write = true
		}
		if write {
			if err := p.write(ctx); err != nil {
				return nil, nil, err
			}
		}
		return newRS, oldRSs, nil
	}
	if !create {
		return nil, oldRSs, nil
	}
	created, err := p.createReplicaSet(ctx, oldRSs, revision)
	if err != nil {
		return nil, nil, err
	}
	return created, oldRSs, nil
}

// createReplicaSet makes the Deployment's new ReplicaSet at revision, as kube's getNewReplicaSet.
func (p *deploymentPass) createReplicaSet(ctx context.Context, oldRSs []*appsv1.ReplicaSet, revision string) (*appsv1.ReplicaSet, error) {
	d := p.d
	hash := PodTemplateHash(&d.Spec.Template, d.Status.CollisionCount)
	template := *d.Spec.Template.DeepCopy()
	template.Labels = withLabel(d.Spec.Template.Labels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	selector := d.Spec.Selector.DeepCopy()
	selector.MatchLabels = withLabel(selector.MatchLabels, appsv1.DefaultDeploymentUniqueLabelKey, hash)
	rs := &appsv1.ReplicaSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ReplicaSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: d.Name + "-" + hash, Namespace: d.Namespace, Labels: template.Labels,
			OwnerReferences: []metav1.OwnerReference{controllerRef(DeploymentOwner, d.Name, p.obj.UID())},
		},
		Spec: appsv1.ReplicaSetSpec{Replicas: new(int32(0)), MinReadySeconds: d.Spec.MinReadySeconds, Selector: selector, Template: template},
	}
	n := newReplicas(d, append(slices.Clone(oldRSs), rs), rs)
	rs.Spec.Replicas = new(n)
	newReplicaSetAnnotations(d, rs, revision, false)
	body, err := toMap(rs)
	if err != nil {
		return nil, reconciler.TerminalError(err)
	}
	key := cache.Key{Group: ReplicaSetResource.Group, Resource: ReplicaSetResource.Resource, Namespace: d.Namespace, Name: rs.Name}
	stored, err := p.r.cfg.Client.Create(ctx, key, body)
	existed := errors.Is(err, cache.ErrAlreadyExists)
	if existed {
		// The name is taken: by this template's ReplicaSet (a cache behind), or by a hash
		// collision, which the next hash, with a collision count, avoids.
		got, err := p.r.cfg.Client.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		other, err := decodeReplicaSet(got)
		if err != nil {
			return nil, reconciler.TerminalError(err)
		}
		if ref := metav1.GetControllerOfNoCopy(other); ref != nil && string(ref.UID) == p.obj.UID() && equalIgnoreHash(&d.Spec.Template, &other.Spec.Template) {
			stored = got
		} else {
			d.Status.CollisionCount = new(ptrOr(d.Status.CollisionCount, 0) + 1)
			if err := p.write(ctx); err != nil {
				return nil, err
			}
			return nil, fmt.Errorf("workloads: replica set %s exists: hash collision, collisionCount now %d", rs.Name, *d.Status.CollisionCount)
		}
	} else if err != nil {
		return nil, err
	}
	created, err := decodeReplicaSet(stored)
	if err != nil {
		return nil, reconciler.TerminalError(err)
	}
	if !existed && n > 0 {
		p.event(ctx, fmt.Sprintf("Scaled up replica set %s from 0 to %d", created.Name, n))
	}
	write := setAnnotation(d, RevisionAnnotation, revision)
	if !existed {
		setDeploymentCondition(&d.Status, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetCreated",
			fmt.Sprintf("Created new replica set %q", created.Name), p.now())
		write = true
	}
	if write {
		return created, p.write(ctx)
	}
	return created, nil
}

// cleanup deletes the oldest old ReplicaSets beyond revisionHistoryLimit that run nothing.
func (p *deploymentPass) cleanup(ctx context.Context, oldRSs []*appsv1.ReplicaSet) error {
	limit := p.d.Spec.RevisionHistoryLimit
	if limit == nil {
		return nil
	}
	alive := slices.DeleteFunc(slices.Clone(oldRSs), func(rs *appsv1.ReplicaSet) bool { return rs == nil || rs.DeletionTimestamp != nil })
	diff := len(alive) - int(*limit)
	if diff <= 0 {
		return nil
	}
	slices.SortStableFunc(alive, func(a, b *appsv1.ReplicaSet) int {
		ra, _ := strconv.ParseInt(a.Annotations[RevisionAnnotation], 10, 64)
		rb, _ := strconv.ParseInt(b.Annotations[RevisionAnnotation], 10, 64)
		return cmp.Or(cmp.Compare(ra, rb), byCreation(a, b))
	})
	for _, rs := range alive[:diff] {
		if rs.Status.Replicas != 0 || *rs.Spec.Replicas != 0 || rs.Generation > rs.Status.ObservedGeneration {
			continue
		}
		key := cache.Key{Group: ReplicaSetResource.Group, Resource: ReplicaSetResource.Resource, Namespace: rs.Namespace, Name: rs.Name}
		if _, _, err := p.r.cfg.Client.Delete(ctx, key, cache.Preconditions{UID: string(rs.UID)}); err != nil && !errors.Is(err, cache.ErrNotFound) {
			return err
		}
	}
	return nil
}

// pausedConditions is kube's checkPausedConditions: Progressing Unknown while paused,
// DeploymentResumed once resumed.
func (p *deploymentPass) pausedConditions(ctx context.Context) error {
	d := p.d
	c := deploymentCondition(d.Status, appsv1.DeploymentProgressing)
	if c != nil && c.Reason == "ProgressDeadlineExceeded" {
		return nil
	}
	paused := c != nil && c.Reason == "DeploymentPaused"
	switch {
	case d.Spec.Paused && !paused:
		setDeploymentCondition(&d.Status, appsv1.DeploymentProgressing, corev1.ConditionUnknown, "DeploymentPaused", "Deployment is paused", p.now())
	case !d.Spec.Paused && paused:
		setDeploymentCondition(&d.Status, appsv1.DeploymentProgressing, corev1.ConditionUnknown, "DeploymentResumed", "Deployment is resumed", p.now())
	default:
		return nil
	}
	return p.write(ctx)
}

// scalingEvent reports whether an active ReplicaSet was sized for other replicas than the
// Deployment's (kube's isScalingEvent).
func (p *deploymentPass) scalingEvent(rsList []*appsv1.ReplicaSet) bool {
	want := strconv.Itoa(int(*p.d.Spec.Replicas))
	for _, rs := range activeReplicaSets(rsList) {
		if v, ok := rs.Annotations[DesiredReplicasAnnotation]; ok && v != want {
			return true
		}
	}
	return false
}

// syncStatus writes the status computed from the ReplicaSets when it changed.
func (p *deploymentPass) syncStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	st := p.status(allRSs, newRS)
	if equalJSON(st, p.d.Status) {
		return nil
	}
	p.d.Status = st
	return p.write(ctx)
}

// syncRolloutStatus is kube's syncRolloutStatus: the status, and the Progressing condition
// of a rollout that completed or made progress.
func (p *deploymentPass) syncRolloutStatus(ctx context.Context, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) error {
	d := p.d
	st := p.status(allRSs, newRS)
	cur := deploymentCondition(d.Status, appsv1.DeploymentProgressing)
	complete := st.Replicas == st.UpdatedReplicas && cur != nil && cur.Reason == "NewReplicaSetAvailable"
	if !complete {
		name := func(what string) string {
			if newRS != nil {
				return fmt.Sprintf("ReplicaSet %q %s", newRS.Name, what)
			}
			return fmt.Sprintf("Deployment %q %s", d.Name, what)
		}
		switch {
		case deploymentComplete(d, st):
			setDeploymentCondition(&st, appsv1.DeploymentProgressing, corev1.ConditionTrue, "NewReplicaSetAvailable", name("has successfully progressed."), p.now())
		case deploymentProgressing(d, st):
			c := appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "ReplicaSetUpdated",
				Message: name("is progressing."), LastUpdateTime: p.now(), LastTransitionTime: p.now()}
			if cur != nil && cur.Status == corev1.ConditionTrue {
				c.LastTransitionTime = cur.LastTransitionTime
			}
			st.Conditions = slices.DeleteFunc(st.Conditions, func(x appsv1.DeploymentCondition) bool { return x.Type == appsv1.DeploymentProgressing })
			st.Conditions = append(st.Conditions, c)
		}
	}
	if equalJSON(st, d.Status) {
		return nil
	}
	d.Status = st
	return p.write(ctx)
}

// status is kube's calculateStatus.
func (p *deploymentPass) status(allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) appsv1.DeploymentStatus {
	d := p.d
	st := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, CollisionCount: d.Status.CollisionCount,
		Conditions: slices.Clone(d.Status.Conditions), TerminatingReplicas: new(int32(0))}
	for _, rs := range allRSs {
		if rs == nil {
			continue
		}
		st.Replicas += rs.Status.Replicas
		st.ReadyReplicas += rs.Status.ReadyReplicas
		st.AvailableReplicas += rs.Status.AvailableReplicas
		*st.TerminatingReplicas += ptrOr(rs.Status.TerminatingReplicas, 0)
	}
	if newRS != nil {
		st.UpdatedReplicas = newRS.Status.Replicas
	}
	st.UnavailableReplicas = max(specReplicas(allRSs)-st.AvailableReplicas, 0)
	if st.AvailableReplicas >= *d.Spec.Replicas-maxUnavailable(*d) {
		setDeploymentCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionTrue, "MinimumReplicasAvailable", "Deployment has minimum availability.", p.now())
	} else {
		setDeploymentCondition(&st, appsv1.DeploymentAvailable, corev1.ConditionFalse, "MinimumReplicasUnavailable", "Deployment does not have minimum availability.", p.now())
	}
	return st
}

// write stores the Deployment's status and annotations through the status subresource (whose
// strategy keeps the spec and labels), conditional on the version last read or written.
func (p *deploymentPass) write(ctx context.Context) error {
	p.d.ResourceVersion = strconv.FormatUint(p.obj.ResourceVersion(), 10)
	body, err := toMap(p.d)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	stored, err := p.r.cfg.Client.UpdateStatus(ctx, p.obj.Key(), body)
	if err != nil {
		return err
	}
	p.obj = stored
	return nil
}

func (p *deploymentPass) event(ctx context.Context, msg string) {
	record(ctx, p.r.cfg, p.obj, "apps/v1", "Deployment", deploymentSource, "ScalingReplicaSet", msg)
}

func (p *deploymentPass) now() metav1.Time { return metav1.NewTime(p.r.cfg.Clock.Now()) }

// writeReplicaSet updates rs (its spec and metadata), conditional on the version it was read at.
func (r *Deployments) writeReplicaSet(ctx context.Context, rs *appsv1.ReplicaSet) error {
	body, err := toMap(rs)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	key := cache.Key{Group: ReplicaSetResource.Group, Resource: ReplicaSetResource.Resource, Namespace: rs.Namespace, Name: rs.Name}
	stored, err := r.cfg.Client.Update(ctx, key, body)
	if err != nil {
		return err
	}
	rs.ResourceVersion = strconv.FormatUint(stored.ResourceVersion(), 10)
	return nil
}

// newReplicaSetAnnotations is kube's SetNewReplicaSetAnnotations: the Deployment's
// annotations copied (but its own), the revision raised to revision (the former one kept in
// the revision history), and for a new ReplicaSet the replicas annotations. It reports a
// change.
func newReplicaSetAnnotations(d *appsv1.Deployment, rs *appsv1.ReplicaSet, revision string, exists bool) bool {
	changed := false
	if rs.Annotations == nil {
		rs.Annotations = map[string]string{}
	}
	for k, v := range d.Annotations {
		if annotationsNotCopied[k] || rs.Annotations[k] == v {
			continue
		}
		rs.Annotations[k], changed = v, true
	}
	old, had := rs.Annotations[RevisionAnnotation]
	oldN, err := strconv.ParseInt(old, 10, 64)
	if err != nil {
		if old != "" {
			return false
		}
		oldN = 0
	}
	newN, err := strconv.ParseInt(revision, 10, 64)
	if err != nil {
		return false
	}
	if oldN < newN {
		rs.Annotations[RevisionAnnotation], changed = revision, true
		if had {
			history := rs.Annotations[RevisionHistoryAnnotation]
			olds := strings.Split(history, ",")
			if olds[0] == "" {
				rs.Annotations[RevisionHistoryAnnotation] = old
			} else {
				total, start := len(history)+len(old)+1, 0
				for total > revisionHistoryChars && start < len(olds) {
					total -= len(olds[start]) + 1
					start++
				}
				if total <= revisionHistoryChars {
					rs.Annotations[RevisionHistoryAnnotation] = strings.Join(append(olds[start:], old), ",")
				}
			}
		}
	}
	if !exists {
		desired, maxTotal := strconv.Itoa(int(*d.Spec.Replicas)), strconv.Itoa(int(*d.Spec.Replicas+maxSurge(*d)))
		if rs.Annotations[DesiredReplicasAnnotation] != desired || rs.Annotations[MaxReplicasAnnotation] != maxTotal {
			rs.Annotations[DesiredReplicasAnnotation], rs.Annotations[MaxReplicasAnnotation], changed = desired, maxTotal, true
		}
	}
	return changed
}

// newReplicas is kube's NewRSNewReplicas: how many replicas the new ReplicaSet may have now.
func newReplicas(d *appsv1.Deployment, allRSs []*appsv1.ReplicaSet, newRS *appsv1.ReplicaSet) int32 {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return *d.Spec.Replicas
	}
	surge, _ := intstr.GetScaledValueFromIntOrPercent(rollingUpdate(*d).MaxSurge, int(*d.Spec.Replicas), true)
	maxTotal := *d.Spec.Replicas + int32(surge)
	current := specReplicas(allRSs)
	if current >= maxTotal {
		return *newRS.Spec.Replicas
	}
	up := min(maxTotal-current, *d.Spec.Replicas-*newRS.Spec.Replicas)
	return *newRS.Spec.Replicas + up
}

// proportion is kube's GetReplicaSetProportion: rs's share of toAdd replicas, added of which
// are given already.
func proportion(rs *appsv1.ReplicaSet, d appsv1.Deployment, toAdd, added int32) int32 {
	if rs == nil || *rs.Spec.Replicas == 0 || toAdd == 0 || toAdd == added {
		return 0
	}
	allowed := toAdd - added
	fraction := func() int32 {
		if *d.Spec.Replicas == 0 {
			return -*rs.Spec.Replicas
		}
		maxNow := *d.Spec.Replicas + maxSurge(d)
		before, err := strconv.ParseInt(rs.Annotations[MaxReplicasAnnotation], 10, 32)
		if err != nil || before == 0 {
			before = int64(d.Status.Replicas)
			if before == 0 {
				return 0
			}
		}
		size := float64(*rs.Spec.Replicas*maxNow) / float64(before)
		return int32(math.Round(size)) - *rs.Spec.Replicas
	}()
	if toAdd > 0 {
		return min(fraction, allowed)
	}
	return max(fraction, allowed)
}

// activeOrLatest is kube's FindActiveOrLatest: the one ReplicaSet with replicas, else the new
// one or the newest; nil when several have replicas.
func activeOrLatest(newRS *appsv1.ReplicaSet, oldRSs []*appsv1.ReplicaSet) *appsv1.ReplicaSet {
	if newRS == nil && len(oldRSs) == 0 {
		return nil
	}
	olds := slices.Clone(oldRSs)
	slices.SortStableFunc(olds, func(a, b *appsv1.ReplicaSet) int { return -byCreation(a, b) })
	all := activeReplicaSets(append(slices.Clone(olds), newRS))
	switch len(all) {
	case 0:
		if newRS != nil {
			return newRS
		}
		return olds[0]
	case 1:
		return all[0]
	}
	return nil
}

// saturated is kube's IsSaturated: the new ReplicaSet runs all the Deployment's replicas.
func saturated(d *appsv1.Deployment, rs *appsv1.ReplicaSet) bool {
	if rs == nil {
		return false
	}
	want := *d.Spec.Replicas
	return *rs.Spec.Replicas == want && rs.Annotations[DesiredReplicasAnnotation] == strconv.Itoa(int(want)) && rs.Status.AvailableReplicas == want
}

// deploymentComplete is kube's DeploymentComplete.
func deploymentComplete(d *appsv1.Deployment, st appsv1.DeploymentStatus) bool {
	want := *d.Spec.Replicas
	return st.UpdatedReplicas == want && st.Replicas == want && st.AvailableReplicas == want && st.ObservedGeneration >= d.Generation
}

// deploymentProgressing is kube's DeploymentProgressing: more updated, fewer old, or more
// ready or available replicas than the status says.
func deploymentProgressing(d *appsv1.Deployment, st appsv1.DeploymentStatus) bool {
	old := d.Status
	return st.UpdatedReplicas > old.UpdatedReplicas || st.Replicas-st.UpdatedReplicas < old.Replicas-old.UpdatedReplicas ||
		st.ReadyReplicas > old.ReadyReplicas || st.AvailableReplicas > old.AvailableReplicas
}

// rollingUpdate is the Deployment's rolling update parameters, kube's defaults (25%) where unset.
func rollingUpdate(d appsv1.Deployment) appsv1.RollingUpdateDeployment {
	pct := intstr.FromString("25%")
	out := appsv1.RollingUpdateDeployment{MaxSurge: &pct, MaxUnavailable: &pct}
	if ru := d.Spec.Strategy.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			out.MaxSurge = ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			out.MaxUnavailable = ru.MaxUnavailable
		}
	}
	return out
}

// fenceposts is kube's ResolveFenceposts: maxSurge rounded up, maxUnavailable down, and 1
// unavailable when both come to 0.
func fenceposts(d appsv1.Deployment) (surge, unavailable int32) {
	ru := rollingUpdate(d)
	desired := int(*d.Spec.Replicas)
	s, err1 := intstr.GetScaledValueFromIntOrPercent(ru.MaxSurge, desired, true)
	u, err2 := intstr.GetScaledValueFromIntOrPercent(ru.MaxUnavailable, desired, false)
	if err1 != nil || err2 != nil {
		return 0, 0
	}
	if s == 0 && u == 0 {
		u = 1
	}
	return int32(s), int32(u)
}

// maxSurge is kube's MaxSurge: none but for a rolling update.
func maxSurge(d appsv1.Deployment) int32 {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return 0
	}
	s, _ := fenceposts(d)
	return s
}

// maxUnavailable is kube's MaxUnavailable: none but for a rolling update, at most replicas.
func maxUnavailable(d appsv1.Deployment) int32 {
	if d.Spec.Strategy.Type != appsv1.RollingUpdateDeploymentStrategyType || *d.Spec.Replicas == 0 {
		return 0
	}
	_, u := fenceposts(d)
	return min(u, *d.Spec.Replicas)
}

// equalIgnoreHash is kube's EqualIgnoreHash: the templates are equal but for pod-template-hash.
func equalIgnoreHash(a, b *corev1.PodTemplateSpec) bool {
	a, b = a.DeepCopy(), b.DeepCopy()
	delete(a.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	delete(b.Labels, appsv1.DefaultDeploymentUniqueLabelKey)
	if len(a.Labels) == 0 {
		a.Labels = nil
	}
	if len(b.Labels) == 0 {
		b.Labels = nil
	}
	return apiequality.Semantic.DeepEqual(a, b)
}

func activeReplicaSets(rss []*appsv1.ReplicaSet) []*appsv1.ReplicaSet {
	var out []*appsv1.ReplicaSet
	for _, rs := range rss {
		if rs != nil && *rs.Spec.Replicas > 0 {
			out = append(out, rs)
		}
	}
	return out
}

func specReplicas(rss []*appsv1.ReplicaSet) int32 {
	n := int32(0)
	for _, rs := range rss {
		if rs != nil {
			n += *rs.Spec.Replicas
		}
	}
	return n
}

// byCreation orders ReplicaSets oldest first, then by name (kube's ReplicaSetsByCreationTimestamp).
func byCreation(a, b *appsv1.ReplicaSet) int {
	return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
}

func withLabel(labels map[string]string, k, v string) map[string]string {
	out := make(map[string]string, len(labels)+1)
	for lk, lv := range labels {
		out[lk] = lv
	}
	out[k] = v
	return out
}

// setAnnotation sets d's annotation k to v and reports whether it changed.
func setAnnotation(d *appsv1.Deployment, k, v string) bool {
	if d.Annotations[k] == v {
		return false
	}
	if d.Annotations == nil {
		d.Annotations = map[string]string{}
	}
	d.Annotations[k] = v
	return true
}

func decodeReplicaSet(o *cache.Object) (*appsv1.ReplicaSet, error) {
	var rs appsv1.ReplicaSet
	if err := decodeInto(o, &rs); err != nil {
		return nil, err
	}
	if rs.Spec.Replicas == nil {
		rs.Spec.Replicas = new(int32(1))
	}
	return &rs, nil
}

func deploymentCondition(st appsv1.DeploymentStatus, t appsv1.DeploymentConditionType) *appsv1.DeploymentCondition {
	for i := range st.Conditions {
		if st.Conditions[i].Type == t {
			return &st.Conditions[i]
		}
	}
	return nil
}

// setDeploymentCondition is kube's SetDeploymentCondition: a condition the same in status and
// reason is kept (its times too); otherwise it is replaced, keeping lastTransitionTime when
// the status did not change.
func setDeploymentCondition(st *appsv1.DeploymentStatus, t appsv1.DeploymentConditionType, status corev1.ConditionStatus, reason, msg string, now metav1.Time) {
	now = metav1.NewTime(now.Truncate(time.Second))
	c := appsv1.DeploymentCondition{Type: t, Status: status, Reason: reason, Message: msg, LastUpdateTime: now, LastTransitionTime: now}
	cur := deploymentCondition(*st, t)
	if cur != nil && cur.Status == status && cur.Reason == reason {
		return
	}
	if cur != nil && cur.Status == status {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	st.Conditions = slices.DeleteFunc(st.Conditions, func(x appsv1.DeploymentCondition) bool { return x.Type == t })
	st.Conditions = append(st.Conditions, c)
}
