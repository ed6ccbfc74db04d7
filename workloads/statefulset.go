package workloads

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const statefulSetSource = "statefulset-controller"

// StatefulSets is kube-controller-manager's StatefulSet controller (pkg/controller/statefulset),
// written again. Each pass lists the Pods the StatefulSet controls (its selector, a controller
// ownerReference to its uid, a name <set>-<ordinal>) and its ControllerRevisions, and:
//   - revisions: the pod template as a ControllerRevision (named <set>-<hash> with kube's hash
//     of kube's patch, so the same StatefulSet gets the same revision names as on a cluster,
//     labelled with the template's labels and controller.kubernetes.io/hash), a new one per new
//     template, an old one given the next revision number when the template returns to it
//     (kubectl rollout undo); those beyond revisionHistoryLimit that no Pod uses are deleted;
//   - Pods: ordinals [start, start+replicas) each get a Pod named <set>-<ordinal> (hostname,
//     subdomain serviceName, labels statefulset.kubernetes.io/pod-name, apps.kubernetes.io/pod-index
//     and controller-revision-hash, a volume per claim template, whose PersistentVolumeClaim
//     <template>-<set>-<ordinal> is created first), ordinals below the partition at the current
//     revision, the others at the update revision; a Succeeded or Failed Pod is deleted to be
//     made again; ordinals beyond are deleted, highest first. With OrderedReady one step at a
//     time, each waiting for the lower ordinals to be Running, Ready and available; Parallel
//     does them all at once;
//   - rolling update: Pods at an old revision from the partition up are deleted, highest first,
//     while fewer than maxUnavailable are unavailable (they come back at the update revision);
//     OnDelete leaves them;
//   - status: replicas, readyReplicas, availableReplicas (minReadySeconds, on the clock),
//     currentReplicas, updatedReplicas, currentRevision, updateRevision (current becomes the
//     update revision once every replica is updated and ready), collisionCount,
//     observedGeneration.
//
// With kube's SuccessfulCreate and SuccessfulDelete Events. A Pod's change enqueues its
// StatefulSet (FollowChildren). Orphans are not adopted; claims are never deleted (the
// retention policy is not applied).
type StatefulSets struct {
	cfg Config
}

var _ reconciler.Reconciler = (*StatefulSets)(nil)

// NewStatefulSets returns the StatefulSet controller.
func NewStatefulSets(cfg Config) *StatefulSets { return &StatefulSets{cfg: cfg.withDefaults()} }

// The resources and owners of the StatefulSet controller.
var (
	ControllerRevisionResource = cache.GroupResource{Group: "apps", Resource: "controllerrevisions"}
	ClaimResource              = cache.GroupResource{Resource: "persistentvolumeclaims"}
	StatefulSetOwner           = Owner{Resource: StatefulSetResource, APIVersion: "apps/v1", Kind: "StatefulSet"}
)

// controllerRevisionHashLabel is the label a ControllerRevision carries its hash in.
const controllerRevisionHashLabel = "controller.kubernetes.io/hash"

// statefulPodName parses a StatefulSet Pod's name into its set's and its ordinal (-1: none).
var statefulPodName = regexp.MustCompile("(.*)-([0-9]+)$")

func podOrdinal(p *corev1.Pod) (string, int) {
	m := statefulPodName.FindStringSubmatch(p.Name)
	if m == nil {
		return "", -1
	}
	i, err := strconv.ParseInt(m[2], 10, 32)
	if err != nil {
		return "", -1
	}
	return m[1], int(i)
}

// statefulSetPass is one pass over a StatefulSet.
type statefulSetPass struct {
	r       *StatefulSets
	obj     *cache.Object
	set     *appsv1.StatefulSet
	now     time.Time
	current *appsv1.ControllerRevision
	update  *appsv1.ControllerRevision
	// currentTemplate and updateTemplate are each revision's pod template.
	currentTemplate, updateTemplate *corev1.PodTemplateSpec
	// wait is the soonest a Pod becomes available (minReadySeconds).
	wait time.Duration
}

// Reconcile does what kube's StatefulSet controller's sync does for the StatefulSet at key.
func (r *StatefulSets) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	var set appsv1.StatefulSet
	obj, gone, err := read(ctx, r.cfg.Client, key, &set)
	if gone {
		r.cfg.claims.forget(key)
	}
	if gone || err != nil {
		return reconciler.Result{}, err
	}
	if set.Spec.Replicas == nil {
		set.Spec.Replicas = new(int32(1))
	}
	sel, err := metav1.LabelSelectorAsSelector(set.Spec.Selector)
	if err != nil || sel.Empty() {
		return reconciler.Result{}, nil
	}
	pods, err := claimOwned(ctx, r.cfg.Client, r.cfg.claims, claim{Children: PodResource, Owner: StatefulSetOwner, Obj: obj, Selector: sel,
		Adoptable: func(o *cache.Object) bool {
			m := statefulPodName.FindStringSubmatch(o.Key().Name)
			return m != nil && m[1] == set.Name
		}}, decodePod)
	if err != nil {
		return reconciler.Result{}, err
	}
	pods = slices.DeleteFunc(pods, func(p *corev1.Pod) bool { parent, _ := podOrdinal(p); return parent != set.Name })
	revisions, err := listOwned(ctx, r.cfg.Client, ControllerRevisionResource, key.Namespace, sel, obj.UID(), decodeRevision)
	if err != nil {
		return reconciler.Result{}, err
	}
	slices.SortStableFunc(revisions, func(a, b *appsv1.ControllerRevision) int {
		return cmp.Or(cmp.Compare(a.Revision, b.Revision), a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	p := &statefulSetPass{r: r, obj: obj, set: &set, now: r.cfg.Clock.Now()}
	collisions, err := p.revisions(ctx, revisions)
	if err != nil {
		return reconciler.Result{}, err
	}
	st, updateErr := p.updatePods(ctx, pods, collisions)
	if st != nil {
		completeUpdate(&set, st)
		if !equalJSON(*st, set.Status) {
			if err := writeStatus(ctx, r.cfg.Client, obj, st); err != nil {
				return reconciler.Result{}, err
			}
		}
	}
	if updateErr != nil {
		return reconciler.Result{}, updateErr
	}
	return reconciler.Result{RequeueAfter: p.wait}, p.truncateHistory(ctx, pods, revisions)
}

// revisions finds or makes the current and update revisions (kube's getStatefulSetRevisions)
// and returns the collision count.
func (p *statefulSetPass) revisions(ctx context.Context, revisions []*appsv1.ControllerRevision) (int32, error) {
	set := p.set
	collisions := ptrOr(set.Status.CollisionCount, 0)
	raw, err := revisionPatch(&set.Spec.Template)
	if err != nil {
		return 0, reconciler.TerminalError(err)
	}
	next := int64(1)
	if n := len(revisions); n > 0 {
		next = revisions[n-1].Revision + 1
	}
	var equal *appsv1.ControllerRevision
	for _, rev := range revisions {
		if sameRevision(rev.Data.Raw, raw) {
			equal = rev
		}
	}
	switch {
	case equal != nil && equal == revisions[len(revisions)-1]:
		p.update = equal
	case equal != nil: // back to an older template: it is the newest revision again
		equal = equal.DeepCopy()
		equal.Revision = next
		if p.update, err = p.writeRevision(ctx, equal); err != nil {
			return 0, err
		}
	default:
		if p.update, err = p.createRevision(ctx, raw, next, &collisions); err != nil {
			return 0, err
		}
	}
	p.current = p.update
	for _, rev := range revisions {
		if rev.Name == set.Status.CurrentRevision {
			p.current = rev
		}
	}
	if p.currentTemplate, err = revisionTemplate(p.current); err != nil {
		return 0, reconciler.TerminalError(err)
	}
	if p.updateTemplate, err = revisionTemplate(p.update); err != nil {
		return 0, reconciler.TerminalError(err)
	}
	return collisions, nil
}

// createRevision creates the ControllerRevision of raw, named with kube's hash, moving past
// names taken by another revision (collisions, as kube's CreateControllerRevision).
func (p *statefulSetPass) createRevision(ctx context.Context, raw []byte, revision int64, collisions *int32) (*appsv1.ControllerRevision, error) {
	set := p.set
	for {
		hash := revisionHash(raw, *collisions)
		labels := map[string]string{controllerRevisionHashLabel: hash}
		for k, v := range set.Spec.Template.Labels {
			labels[k] = v
		}
		cr := &appsv1.ControllerRevision{
			TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"},
			ObjectMeta: metav1.ObjectMeta{
				Name: revisionName(set.Name, hash), Namespace: set.Namespace, Labels: labels, Annotations: set.Annotations,
				OwnerReferences: []metav1.OwnerReference{controllerRef(StatefulSetOwner, set.Name, p.obj.UID())},
			},
			Data:     runtimeRaw(raw),
			Revision: revision,
		}
		body, err := toMap(cr)
		if err != nil {
			return nil, reconciler.TerminalError(err)
		}
		key := cache.Key{Group: ControllerRevisionResource.Group, Resource: ControllerRevisionResource.Resource, Namespace: set.Namespace, Name: cr.Name}
		created, err := p.r.cfg.Client.Create(ctx, key, body)
		if err == nil {
			return decodeRevision(created)
		}
		if !errors.Is(err, cache.ErrAlreadyExists) {
			return nil, err
		}
		o, err := p.r.cfg.Client.Get(ctx, key)
		if err != nil {
			return nil, err
		}
		existing, err := decodeRevision(o)
		if err != nil {
			return nil, reconciler.TerminalError(err)
		}
		if sameRevision(existing.Data.Raw, raw) {
			return existing, nil
		}
		*collisions++
	}
}

// writeRevision updates a ControllerRevision (its revision number).
func (p *statefulSetPass) writeRevision(ctx context.Context, cr *appsv1.ControllerRevision) (*appsv1.ControllerRevision, error) {
	body, err := toMap(cr)
	if err != nil {
		return nil, reconciler.TerminalError(err)
	}
	key := cache.Key{Group: ControllerRevisionResource.Group, Resource: ControllerRevisionResource.Resource, Namespace: cr.Namespace, Name: cr.Name}
	o, err := p.r.cfg.Client.Update(ctx, key, body)
	if err != nil {
		return nil, err
	}
	return decodeRevision(o)
}

// updatePods creates, deletes and replaces the set's Pods (kube's updateStatefulSet) and
// returns the status counted from them.
func (p *statefulSetPass) updatePods(ctx context.Context, pods []*corev1.Pod, collisions int32) (*appsv1.StatefulSetStatus, error) {
	set := p.set
	st := &appsv1.StatefulSetStatus{
		ObservedGeneration: set.Generation, CurrentRevision: p.current.Name, UpdateRevision: p.update.Name,
		CollisionCount: new(collisions), Conditions: set.Status.Conditions,
	}
	start := 0
	if set.Spec.Ordinals != nil {
		start = int(set.Spec.Ordinals.Start)
	}
	n := int(*set.Spec.Replicas)
	replicas := make([]*corev1.Pod, n)
	var condemned []*corev1.Pod
	for _, pod := range pods {
		_, ord := podOrdinal(pod)
		switch {
		case ord >= start && ord < start+n:
			replicas[ord-start] = pod
		case ord >= 0:
			condemned = append(condemned, pod)
		}
	}
	slices.SortFunc(condemned, func(a, b *corev1.Pod) int { _, x := podOrdinal(a); _, y := podOrdinal(b); return cmp.Compare(y, x) })
	count := func() {
		p.count(st, slices.Concat(replicas, condemned))
	}
	count()
	if p.obj.Deleting() {
		return st, nil
	}
	var firstUnavailable *corev1.Pod
	for _, pod := range replicas {
		if pod != nil && p.unavailable(pod) {
			firstUnavailable = pod
			break
		}
	}
	if firstUnavailable == nil {
		for i := len(condemned) - 1; i >= 0; i-- {
			if p.unavailable(condemned[i]) {
				firstUnavailable = condemned[i]
				break
			}
		}
	}
	monotonic := set.Spec.PodManagementPolicy != appsv1.ParallelPodManagement
	for i := range replicas {
		exit, err := p.processReplica(ctx, replicas, i, start+i, monotonic)
		if err != nil || (exit && monotonic) {
			count()
			return st, err
		}
	}
	for i := range condemned {
		exit, err := p.processCondemned(ctx, condemned[i], firstUnavailable, monotonic)
		if err != nil || (exit && monotonic) {
			count()
			return st, err
		}
	}
	count()
	if set.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return st, nil
	}
	return st, p.rollingUpdate(ctx, replicas, st)
}

// processReplica brings the Pod of ordinal ord (replicas[i]) to life and reports whether a
// monotonic pass stops there (kube's processReplica).
func (p *statefulSetPass) processReplica(ctx context.Context, replicas []*corev1.Pod, i, ord int, monotonic bool) (bool, error) {
	pod := replicas[i]
	if pod != nil && podFinished(pod) {
		if pod.DeletionTimestamp == nil {
			if err := p.deletePod(ctx, pod); err != nil {
				return true, err
			}
		}
		return true, nil // made again once it is gone
	}
	if pod == nil {
		created, err := p.createPod(ctx, ord)
		if err != nil {
			return true, err
		}
		replicas[i] = created
		if monotonic {
			return true, nil
		}
		pod = created
	}
	if pod.DeletionTimestamp != nil && monotonic {
		return true, nil
	}
	if !podRunningAndReady(pod) && monotonic {
		return true, nil
	}
	if wait, _ := podAvailable(pod, p.set.Spec.MinReadySeconds, p.now); wait > 0 && monotonic {
		return true, nil
	}
	return false, nil
}

// processCondemned deletes a Pod beyond the replicas, in a monotonic pass only once every
// lower one is Running, Ready and available (kube's processCondemned).
func (p *statefulSetPass) processCondemned(ctx context.Context, pod, firstUnavailable *corev1.Pod, monotonic bool) (bool, error) {
	if pod.DeletionTimestamp != nil {
		return monotonic, nil
	}
	if monotonic && pod != firstUnavailable && p.unavailable(pod) {
		return true, nil
	}
	return true, p.deletePod(ctx, pod)
}

// rollingUpdate deletes the Pods from the partition up that are not at the update revision,
// highest first, within maxUnavailable (kube's updateStatefulSetAfterInvariantEstablished).
func (p *statefulSetPass) rollingUpdate(ctx context.Context, replicas []*corev1.Pod, st *appsv1.StatefulSetStatus) error {
	set := p.set
	partition, maxUnavailable := 0, 1
	if ru := set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		partition = int(ptrOr(ru.Partition, 0))
		n, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxUnavailable, intstr.FromInt32(1)), len(replicas), false)
		if err != nil {
			return reconciler.TerminalError(err)
		}
		maxUnavailable = max(n, 1)
	}
	unavailable, unavailableOld := 0, 0
	parallel := set.Spec.PodManagementPolicy == appsv1.ParallelPodManagement
	for _, pod := range replicas {
		if p.unavailable(pod) {
			unavailable++
			if parallel && podRevision(pod) != p.update.Name && pod.DeletionTimestamp == nil {
				unavailableOld++
			}
		}
	}
	if unavailable >= maxUnavailable && unavailableOld == 0 {
		return nil
	}
	old := func(pod *corev1.Pod) bool { return podRevision(pod) != p.update.Name && pod.DeletionTimestamp == nil }
	budget := maxUnavailable - unavailable
	if parallel {
		// First the old Pods already unavailable, then available ones within the budget.
		for t := len(replicas) - 1; t >= partition; t-- {
			if old(replicas[t]) && p.unavailable(replicas[t]) {
				if err := p.deletePod(ctx, replicas[t]); err != nil {
					return err
				}
				st.CurrentReplicas--
			}
		}
	}
	for t := len(replicas) - 1; t >= partition && budget > 0; t-- {
		if old(replicas[t]) && (!parallel || !p.unavailable(replicas[t])) {
			if err := p.deletePod(ctx, replicas[t]); err != nil {
				return err
			}
			budget--
			st.CurrentReplicas--
		}
	}
	return nil
}

// unavailable: not Ready for minReadySeconds, or being deleted (kube's isUnavailable). A
// Ready Pod not yet available makes the pass come back when it is.
func (p *statefulSetPass) unavailable(pod *corev1.Pod) bool {
	wait, ready := podAvailable(pod, p.set.Spec.MinReadySeconds, p.now)
	p.wait = sooner(p.wait, wait)
	return !ready || wait > 0 || pod.DeletionTimestamp != nil
}

// count sets the status's counts from pods (nil: not created), as kube's updateStatus.
func (p *statefulSetPass) count(st *appsv1.StatefulSetStatus, pods []*corev1.Pod) {
	st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.CurrentReplicas, st.UpdatedReplicas = 0, 0, 0, 0, 0
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		st.Replicas++
		if podRunningAndReady(pod) {
			st.ReadyReplicas++
			if wait, _ := podAvailable(pod, p.set.Spec.MinReadySeconds, p.now); wait == 0 {
				st.AvailableReplicas++
			}
		}
		if pod.DeletionTimestamp == nil {
			switch rev := podRevision(pod); {
			case rev == p.current.Name && rev == p.update.Name:
				st.CurrentReplicas++
				st.UpdatedReplicas++
			case rev == p.current.Name:
				st.CurrentReplicas++
			case rev == p.update.Name:
				st.UpdatedReplicas++
			}
		}
	}
}

// createPod creates the Pod of ordinal ord, and first its claims (kube's CreateStatefulPod).
func (p *statefulSetPass) createPod(ctx context.Context, ord int) (*corev1.Pod, error) {
	template, rev := p.updateTemplate, p.update.Name
	partition := 0
	if ru := p.set.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		partition = int(ptrOr(ru.Partition, 0))
	} else if p.set.Spec.UpdateStrategy.Type == appsv1.RollingUpdateStatefulSetStrategyType {
		partition = int(p.set.Status.CurrentReplicas)
	}
	start := 0
	if p.set.Spec.Ordinals != nil {
		start = int(p.set.Spec.Ordinals.Start)
	}
	if p.set.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType && ord < start+partition {
		template, rev = p.currentTemplate, p.current.Name
	}
	name := fmt.Sprintf("%s-%d", p.set.Name, ord)
	pod := podFromTemplate(template, p.set.Namespace, name, controllerRef(StatefulSetOwner, p.set.Name, p.obj.UID()))
	if pod.Labels == nil {
		pod.Labels = map[string]string{}
	}
	pod.Labels[appsv1.StatefulSetPodNameLabel] = name
	pod.Labels[appsv1.PodIndexLabel] = strconv.Itoa(ord)
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
	pod.Spec.Hostname, pod.Spec.Subdomain = name, p.set.Spec.ServiceName
	claims := p.claims(ord)
	volumes := make([]corev1.Volume, 0, len(claims)+len(pod.Spec.Volumes))
	for _, c := range claims {
		volumes = append(volumes, corev1.Volume{Name: c.template, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: c.claim.Name}}})
	}
	for _, v := range pod.Spec.Volumes {
		if !slices.ContainsFunc(claims, func(c podClaim) bool { return c.template == v.Name }) {
			volumes = append(volumes, v)
		}
	}
	pod.Spec.Volumes = volumes
	for _, c := range claims {
		if err := p.createClaim(ctx, c.claim, name); err != nil {
			return nil, err
		}
	}
	created, err := createPod(ctx, p.r.cfg.Client, pod)
	if err != nil {
		return nil, err
	}
	p.event("SuccessfulCreate", fmt.Sprintf("create Pod %s in StatefulSet %s successful", name, p.set.Name))
	return created, nil
}

// podClaim is a claim of a StatefulSet Pod and the template it is made from.
type podClaim struct {
	template string
	claim    *corev1.PersistentVolumeClaim
}

// claims are ordinal ord's PersistentVolumeClaims: <template>-<set>-<ordinal>, labelled with
// the template's labels and the selector's (kube's getPersistentVolumeClaims).
func (p *statefulSetPass) claims(ord int) []podClaim {
	var out []podClaim
	for _, t := range p.set.Spec.VolumeClaimTemplates {
		c := t.DeepCopy()
		c.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"}
		c.Name = fmt.Sprintf("%s-%s-%d", t.Name, p.set.Name, ord)
		c.Namespace = p.set.Namespace
		c.Status = corev1.PersistentVolumeClaimStatus{}
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		for k, v := range p.set.Spec.Selector.MatchLabels {
			c.Labels[k] = v
		}
		out = append(out, podClaim{template: t.Name, claim: c})
	}
	return out
}

// createClaim creates claim unless it exists.
func (p *statefulSetPass) createClaim(ctx context.Context, claim *corev1.PersistentVolumeClaim, pod string) error {
	body, err := toMap(claim)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	_, err = p.r.cfg.Client.Create(ctx, cache.Key{Resource: ClaimResource.Resource, Namespace: claim.Namespace, Name: claim.Name}, body)
	if errors.Is(err, cache.ErrAlreadyExists) {
		return nil
	}
	if err != nil {
		return err
	}
	p.event("SuccessfulCreate", fmt.Sprintf("create Claim %s Pod %s in StatefulSet %s success", claim.Name, pod, p.set.Name))
	return nil
}

// deletePod deletes pod and marks it terminating for the rest of the pass.
func (p *statefulSetPass) deletePod(ctx context.Context, pod *corev1.Pod) error {
	if err := deletePod(ctx, p.r.cfg.Client, pod); err != nil {
		return err
	}
	pod.DeletionTimestamp = &metav1.Time{Time: p.now}
	p.event("SuccessfulDelete", fmt.Sprintf("delete Pod %s in StatefulSet %s successful", pod.Name, p.set.Name))
	return nil
}

func (p *statefulSetPass) event(reason, msg string) {
	record(context.Background(), p.r.cfg, p.obj, "apps/v1", "StatefulSet", statefulSetSource, reason, msg)
}

// truncateHistory deletes the oldest revisions no Pod and neither status revision uses,
// beyond revisionHistoryLimit.
func (p *statefulSetPass) truncateHistory(ctx context.Context, pods []*corev1.Pod, revisions []*appsv1.ControllerRevision) error {
	live := map[string]bool{p.current.Name: true, p.update.Name: true}
	for _, pod := range pods {
		live[podRevision(pod)] = true
	}
	var history []*appsv1.ControllerRevision
	for _, rev := range revisions {
		if !live[rev.Name] {
			history = append(history, rev)
		}
	}
	limit := int(ptrOr(p.set.Spec.RevisionHistoryLimit, 10))
	for _, rev := range history[:max(len(history)-limit, 0)] {
		key := cache.Key{Group: ControllerRevisionResource.Group, Resource: ControllerRevisionResource.Resource, Namespace: rev.Namespace, Name: rev.Name}
		if _, _, err := p.r.cfg.Client.Delete(ctx, key, cache.Preconditions{UID: string(rev.UID)}); err != nil && !errors.Is(err, cache.ErrNotFound) {
			return err
		}
	}
	return nil
}

// completeUpdate makes the update revision current once every replica is at it and ready.
func completeUpdate(set *appsv1.StatefulSet, st *appsv1.StatefulSetStatus) {
	n := *set.Spec.Replicas
	if st.UpdatedReplicas == n && st.ReadyReplicas == n && st.Replicas == n {
		st.CurrentReplicas, st.CurrentRevision = st.UpdatedReplicas, st.UpdateRevision
	}
}

func podRevision(p *corev1.Pod) string {
	if p == nil {
		return ""
	}
	return p.Labels[appsv1.ControllerRevisionHashLabelKey]
}

func decodeRevision(o *cache.Object) (*appsv1.ControllerRevision, error) {
	var cr appsv1.ControllerRevision
	if err := decodeInto(o, &cr); err != nil {
		return nil, err
	}
	return &cr, nil
}
