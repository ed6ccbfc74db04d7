package workloads

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

const daemonSetSource = "daemonset-controller"

// The resources and owner of the DaemonSet controller.
var (
	DaemonSetResource = cache.GroupResource{Group: "apps", Resource: "daemonsets"}
	NodeResource      = cache.GroupResource{Resource: "nodes"}
	DaemonSetOwner    = Owner{Resource: DaemonSetResource, APIVersion: "apps/v1", Kind: "DaemonSet"}
)

// The labels a DaemonSet's Pods carry: the template's generation and revision hash.
const (
	templateGenerationLabel      = "pod-template-generation"
	templateGenerationAnnotation = "deprecated.daemonset.template.generation"
)

// DaemonSets is kube-controller-manager's DaemonSet controller (pkg/controller/daemon),
// written again. Each pass lists the Nodes and the Pods the DaemonSet controls (its selector,
// a controller ownerReference to its uid) and:
//   - revisions: its pod template as a ControllerRevision <name>-<hash> (kube's
//     pod-template-hash of the template and collisionCount), made anew or given the next
//     revision number when the template returns to it; those beyond revisionHistoryLimit no
//     Pod uses are deleted;
//   - Pods: a Node should run its Pod when it matches the template's nodeName, nodeSelector
//     and required node affinity and has no NoSchedule or NoExecute taint the Pod does not
//     tolerate (with the tolerations every DaemonSet Pod gets: not-ready, unreachable, the
//     pressure taints, unschedulable); such a Node without one gets a Pod (generateName
//     <name>-, labels controller-revision-hash and pod-template-generation, those
//     tolerations, and a required node affinity matchFields metadata.name In [node] in
//     place of the template's, so the scheduler binds it there); a Node that should not run
//     one loses it (a NoExecute taint it tolerates keeps it), a Succeeded or Failed Pod is
//     deleted to be made again, a second one is deleted;
//   - rolling update: old Pods are deleted, unavailable ones first, while fewer than
//     maxUnavailable (of the Nodes that should run one) are unavailable; OnDelete leaves them;
//   - status: desiredNumberScheduled, currentNumberScheduled, numberMisscheduled, numberReady,
//     updatedNumberScheduled, numberAvailable (minReadySeconds, on the clock),
//     numberUnavailable, collisionCount, observedGeneration.
//
// With kube's SuccessfulCreate and SuccessfulDelete Events. A Pod's change enqueues its
// DaemonSet (FollowChildren), a Node's every DaemonSet (FollowNodes). maxSurge is not
// applied (a rolling update deletes before it creates); orphan Pods its selector selects are adopted.
type DaemonSets struct {
	cfg Config
}

var _ reconciler.Reconciler = (*DaemonSets)(nil)

// NewDaemonSets returns the DaemonSet controller.
func NewDaemonSets(cfg Config) *DaemonSets { return &DaemonSets{cfg: cfg.withDefaults()} }

// daemonSetPass is one pass over a DaemonSet.
type daemonSetPass struct {
	r          *DaemonSets
	obj        *cache.Object
	ds         *appsv1.DaemonSet
	now        time.Time
	hash       string
	generation *int64
	// tolerations are the template's with those every DaemonSet Pod gets.
	tolerations []corev1.Toleration
	affinity    nodeaffinity.RequiredNodeAffinity
	wait        time.Duration
}

// Reconcile does what kube's syncDaemonSet does for the DaemonSet at key.
func (r *DaemonSets) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	var ds appsv1.DaemonSet
	obj, gone, err := read(ctx, r.cfg.Client, key, &ds)
	if gone {
		r.cfg.claims.forget(key)
	}
	if gone || err != nil {
		return reconciler.Result{}, err
	}
	sel, err := metav1.LabelSelectorAsSelector(ds.Spec.Selector)
	if err != nil || sel.Empty() {
		return reconciler.Result{}, nil
	}
	nl, err := r.cfg.Client.List(ctx, NodeResource)
	if err != nil {
		return reconciler.Result{}, err
	}
	var nodes []*corev1.Node
	for _, o := range nl.Items {
		var n corev1.Node
		if decodeInto(o, &n) == nil {
			nodes = append(nodes, &n)
		}
	}
	pods, err := claimOwned(ctx, r.cfg.Client, r.cfg.claims, claim{Children: PodResource, Owner: DaemonSetOwner, Obj: obj, Selector: sel}, decodePod)
	if err != nil {
		return reconciler.Result{}, err
	}
	revisions, err := listOwned(ctx, r.cfg.Client, ControllerRevisionResource, key.Namespace, sel, obj.UID(), decodeRevision)
	if err != nil {
		return reconciler.Result{}, err
	}
	spec := ds.Spec.Template.Spec.DeepCopy()
	addDaemonTolerations(spec)
	p := &daemonSetPass{r: r, obj: obj, ds: &ds, now: r.cfg.Clock.Now(), tolerations: spec.Tolerations,
		affinity: nodeaffinity.GetRequiredNodeAffinity(&corev1.Pod{Spec: ds.Spec.Template.Spec})}
	if g, err := strconv.ParseInt(ds.Annotations[templateGenerationAnnotation], 10, 64); err == nil {
		p.generation = &g
	}
	cur, old, err := p.history(ctx, revisions)
	if err != nil {
		return reconciler.Result{}, err
	}
	p.hash = cur.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]
	var manageErr error
	if !obj.Deleting() {
		manageErr = p.manage(ctx, nodes, pods)
		if manageErr == nil && ds.Spec.UpdateStrategy.Type != appsv1.OnDeleteDaemonSetStrategyType {
			manageErr = p.rollingUpdate(ctx, nodes, pods)
		}
		if manageErr == nil {
			manageErr = p.cleanupHistory(ctx, pods, old)
		}
	}
	st := p.status(nodes, pods)
	if !equalJSON(st, ds.Status) {
		if err := writeStatus(ctx, r.cfg.Client, obj, st); err != nil {
			return reconciler.Result{}, err
		}
	}
	return reconciler.Result{RequeueAfter: p.wait}, manageErr
}

// history finds or makes the ControllerRevision of the current template (kube's
// constructHistory) and returns it and the others.
func (p *daemonSetPass) history(ctx context.Context, revisions []*appsv1.ControllerRevision) (*appsv1.ControllerRevision, []*appsv1.ControllerRevision, error) {
	ds := p.ds
	raw, err := revisionPatch(&ds.Spec.Template)
	if err != nil {
		return nil, nil, reconciler.TerminalError(err)
	}
	var cur *appsv1.ControllerRevision
	var old []*appsv1.ControllerRevision
	for _, rev := range revisions {
		if cur == nil && sameRevision(rev.Data.Raw, raw) {
			cur = rev
		} else {
			old = append(old, rev)
		}
	}
	next := int64(1)
	for _, rev := range old {
		next = max(next, rev.Revision+1)
	}
	key := func(name string) cache.Key {
		return cache.Key{Group: ControllerRevisionResource.Group, Resource: ControllerRevisionResource.Resource, Namespace: ds.Namespace, Name: name}
	}
	if cur != nil {
		if cur.Revision < next {
			cur = cur.DeepCopy()
			cur.Revision = next
			body, err := toMap(cur)
			if err != nil {
				return nil, nil, reconciler.TerminalError(err)
			}
			o, err := p.r.cfg.Client.Update(ctx, key(cur.Name), body)
			if err != nil {
				return nil, nil, err
			}
			if cur, err = decodeRevision(o); err != nil {
				return nil, nil, reconciler.TerminalError(err)
			}
		}
		return cur, old, nil
	}
	hash := PodTemplateHash(&ds.Spec.Template, ds.Status.CollisionCount)
	labels := map[string]string{appsv1.DefaultDaemonSetUniqueLabelKey: hash}
	for k, v := range ds.Spec.Template.Labels {
		labels[k] = v
	}
	cr := &appsv1.ControllerRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "ControllerRevision"},
		ObjectMeta: metav1.ObjectMeta{Name: ds.Name + "-" + hash, Namespace: ds.Namespace, Labels: labels, Annotations: ds.Annotations,
			OwnerReferences: []metav1.OwnerReference{controllerRef(DaemonSetOwner, ds.Name, p.obj.UID())}},
		Data: runtimeRaw(raw), Revision: next,
	}
	body, err := toMap(cr)
	if err != nil {
		return nil, nil, reconciler.TerminalError(err)
	}
	o, err := p.r.cfg.Client.Create(ctx, key(cr.Name), body)
	if errors.Is(err, cache.ErrAlreadyExists) {
		// Another DaemonSet's revision has the name: count the collision, try again.
		st := ds.Status.DeepCopy()
		st.CollisionCount = new(ptrOr(st.CollisionCount, 0) + 1)
		if err := writeStatus(ctx, p.r.cfg.Client, p.obj, st); err != nil {
			return nil, nil, err
		}
		return nil, nil, fmt.Errorf("workloads: DaemonSet %s/%s: revision %s exists: collision count raised", ds.Namespace, ds.Name, cr.Name)
	}
	if err != nil {
		return nil, nil, err
	}
	cur, err = decodeRevision(o)
	if err != nil {
		return nil, nil, reconciler.TerminalError(err)
	}
	return cur, old, nil
}

// nodePods maps each Node's name to the DaemonSet's Pods on it (bound, or pinned there by
// their affinity), oldest first; Pods being deleted and finished are left out with
// skipGoing.
func nodePods(pods []*corev1.Pod, skipGoing bool) map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, pod := range pods {
		if skipGoing && pod.DeletionTimestamp != nil && podFinished(pod) {
			continue
		}
		if node := targetNode(pod); node != "" {
			out[node] = append(out[node], pod)
		}
	}
	for _, l := range out {
		slices.SortStableFunc(l, func(a, b *corev1.Pod) int {
			return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
		})
	}
	return out
}

// targetNode is the Node a DaemonSet Pod is for: its nodeName, else the node its affinity
// pins it to (kube's GetTargetNodeName).
func targetNode(pod *corev1.Pod) string {
	if pod.Spec.NodeName != "" {
		return pod.Spec.NodeName
	}
	a := pod.Spec.Affinity
	if a == nil || a.NodeAffinity == nil || a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == metav1.ObjectNameField && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// shouldRun says whether node should run the DaemonSet's Pod, and whether one there may go on
// running (kube's nodeShouldRunDaemonPod).
func (p *daemonSetPass) shouldRun(node *corev1.Node) (run, keep bool) {
	if n := p.ds.Spec.Template.Spec.NodeName; n != "" && n != node.Name {
		return false, false
	}
	if ok, _ := p.affinity.Match(node); !ok {
		return false, false
	}
	untolerated := func(effects ...corev1.TaintEffect) bool {
		_, found := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), node.Spec.Taints, p.tolerations, func(t *corev1.Taint) bool {
			return slices.Contains(effects, t.Effect)
		}, false)
		return found
	}
	if untolerated(corev1.TaintEffectNoSchedule, corev1.TaintEffectNoExecute) {
		return false, !untolerated(corev1.TaintEffectNoExecute)
	}
	return true, true
}

// manage creates the missing Pods and deletes those that should go (kube's manage and
// podsShouldBeOnNode, without surge).
func (p *daemonSetPass) manage(ctx context.Context, nodes []*corev1.Node, pods []*corev1.Pod) error {
	byNode := nodePods(pods, true)
	var create []string
	var remove []*corev1.Pod
	for _, node := range nodes {
		run, keep := p.shouldRun(node)
		here := byNode[node.Name]
		switch {
		case run && len(here) == 0:
			create = append(create, node.Name)
		case keep:
			var running []*corev1.Pod
			for _, pod := range here {
				switch {
				case pod.DeletionTimestamp != nil:
				case podFinished(pod):
					remove = append(remove, pod)
				default:
					running = append(running, pod)
				}
			}
			if len(running) > 1 {
				remove = append(remove, running[1:]...)
			}
		case len(here) > 0:
			for _, pod := range here {
				if pod.DeletionTimestamp == nil {
					remove = append(remove, pod)
				}
			}
		}
	}
	for _, pod := range remove {
		if err := p.deletePod(ctx, pod); err != nil {
			return err
		}
	}
	for _, node := range create {
		if err := p.createPod(ctx, node); err != nil {
			return err
		}
	}
	return nil
}

// createPod creates the DaemonSet's Pod for node (kube's CreatePodTemplate and syncNodes).
func (p *daemonSetPass) createPod(ctx context.Context, node string) error {
	t := p.ds.Spec.Template.DeepCopy()
	addDaemonTolerations(&t.Spec)
	if t.Labels == nil {
		t.Labels = map[string]string{}
	}
	if p.generation != nil {
		t.Labels[templateGenerationLabel] = strconv.FormatInt(*p.generation, 10)
	}
	t.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] = p.hash
	t.Spec.Affinity = pinToNode(t.Spec.Affinity, node)
	pod, err := createPod(ctx, p.r.cfg.Client, podFromTemplate(t, p.ds.Namespace, p.ds.Name+"-", controllerRef(DaemonSetOwner, p.ds.Name, p.obj.UID())))
	if err != nil {
		return err
	}
	p.event("SuccessfulCreate", "Created pod: "+pod.Name)
	return nil
}

func (p *daemonSetPass) deletePod(ctx context.Context, pod *corev1.Pod) error {
	if err := deletePod(ctx, p.r.cfg.Client, pod); err != nil {
		return err
	}
	pod.DeletionTimestamp = &metav1.Time{Time: p.now}
	p.event("SuccessfulDelete", "Deleted pod: "+pod.Name)
	return nil
}

// rollingUpdate deletes old Pods within maxUnavailable (kube's rollingUpdate without surge):
// the new ones are made on the next pass.
func (p *daemonSetPass) rollingUpdate(ctx context.Context, nodes []*corev1.Node, pods []*corev1.Pod) error {
	byNode := nodePods(pods, true)
	desired := 0
	for _, node := range nodes {
		if run, _ := p.shouldRun(node); run {
			desired++
			if _, ok := byNode[node.Name]; !ok {
				byNode[node.Name] = nil
			}
		}
	}
	maxUnavailable := 1
	if ru := p.ds.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		n, err := intstr.GetScaledValueFromIntOrPercent(intstr.ValueOrDefault(ru.MaxUnavailable, intstr.FromInt32(1)), desired, true)
		if err != nil {
			return reconciler.TerminalError(err)
		}
		maxUnavailable = n
	}
	unavailable := 0
	var replaceNow, candidates []*corev1.Pod
	names := make([]string, 0, len(byNode))
	for name := range byNode {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		var newPod, oldPod *corev1.Pod
		dup := false
		for _, pod := range byNode[name] {
			if pod.DeletionTimestamp != nil {
				continue
			}
			target := &oldPod
			if p.updated(pod) {
				target = &newPod
			}
			if *target != nil {
				dup = true
			}
			*target = pod
		}
		switch {
		case dup, newPod == nil && oldPod == nil, newPod != nil && oldPod != nil:
			unavailable++
		case newPod != nil:
			if !p.available(newPod) {
				unavailable++
			}
		case !p.available(oldPod):
			replaceNow = append(replaceNow, oldPod)
		default:
			candidates = append(candidates, oldPod)
		}
	}
	budget := max(maxUnavailable-unavailable, 0)
	for _, pod := range append(replaceNow, candidates[:min(budget, len(candidates))]...) {
		if err := p.deletePod(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// updated: the Pod is of the current template (kube's IsPodUpdated).
func (p *daemonSetPass) updated(pod *corev1.Pod) bool {
	if p.hash != "" && pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey] == p.hash {
		return true
	}
	return p.generation != nil && pod.Labels[templateGenerationLabel] == strconv.FormatInt(*p.generation, 10)
}

// available: Ready for minReadySeconds; a Pod on its way there makes the pass come back.
func (p *daemonSetPass) available(pod *corev1.Pod) bool {
	wait, ready := podAvailable(pod, p.ds.Spec.MinReadySeconds, p.now)
	p.wait = sooner(p.wait, wait)
	return ready && wait == 0
}

// cleanupHistory deletes the old revisions no Pod uses beyond revisionHistoryLimit, oldest
// first.
func (p *daemonSetPass) cleanupHistory(ctx context.Context, pods []*corev1.Pod, old []*appsv1.ControllerRevision) error {
	limit := int(ptrOr(p.ds.Spec.RevisionHistoryLimit, 10))
	if len(old) <= limit {
		return nil
	}
	live := map[string]bool{}
	for _, pod := range pods {
		live[pod.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] = true
	}
	slices.SortStableFunc(old, func(a, b *appsv1.ControllerRevision) int { return cmp.Compare(a.Revision, b.Revision) })
	surplus := len(old) - limit
	for _, rev := range old {
		if surplus == 0 {
			break
		}
		if live[rev.Labels[appsv1.DefaultDaemonSetUniqueLabelKey]] {
			continue
		}
		key := cache.Key{Group: ControllerRevisionResource.Group, Resource: ControllerRevisionResource.Resource, Namespace: rev.Namespace, Name: rev.Name}
		if _, _, err := p.r.cfg.Client.Delete(ctx, key, cache.Preconditions{UID: string(rev.UID)}); err != nil && !errors.Is(err, cache.ErrNotFound) {
			return err
		}
		surplus--
	}
	return nil
}

// status counts the DaemonSet's Pods per Node (kube's updateDaemonSetStatus).
func (p *daemonSetPass) status(nodes []*corev1.Node, pods []*corev1.Pod) appsv1.DaemonSetStatus {
	st := appsv1.DaemonSetStatus{ObservedGeneration: p.ds.Generation, CollisionCount: p.ds.Status.CollisionCount, Conditions: p.ds.Status.Conditions}
	byNode := nodePods(pods, true)
	for _, node := range nodes {
		run, _ := p.shouldRun(node)
		here := byNode[node.Name]
		switch {
		case run:
			st.DesiredNumberScheduled++
			if len(here) == 0 {
				continue
			}
			st.CurrentNumberScheduled++
			pod := here[0]
			if c := podReadyCondition(pod); c != nil && c.Status == corev1.ConditionTrue {
				st.NumberReady++
				if p.available(pod) {
					st.NumberAvailable++
				}
			}
			if p.updated(pod) {
				st.UpdatedNumberScheduled++
			}
		case len(here) > 0:
			st.NumberMisscheduled++
		}
	}
	st.NumberUnavailable = st.DesiredNumberScheduled - st.NumberAvailable
	return st
}

func (p *daemonSetPass) event(reason, msg string) {
	recordEvent(context.Background(), p.r.cfg, p.obj, "apps/v1", "DaemonSet", daemonSetSource, events.TypeNormal, reason, msg)
}

// addDaemonTolerations adds the tolerations every DaemonSet Pod gets (kube's
// AddOrUpdateDaemonPodTolerations): the not-ready and unreachable NoExecute taints, the
// pressure and unschedulable NoSchedule ones, and with the host's network, network-unavailable.
func addDaemonTolerations(spec *corev1.PodSpec) {
	add := func(key string, effect corev1.TaintEffect) {
		t := corev1.Toleration{Key: key, Operator: corev1.TolerationOpExists, Effect: effect}
		for i := range spec.Tolerations {
			if o := spec.Tolerations[i]; o.Key == key && o.Effect == effect && o.Operator == t.Operator && o.Value == "" {
				spec.Tolerations[i] = t
				return
			}
		}
		spec.Tolerations = append(spec.Tolerations, t)
	}
	add(corev1.TaintNodeNotReady, corev1.TaintEffectNoExecute)
	add(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute)
	add(corev1.TaintNodeDiskPressure, corev1.TaintEffectNoSchedule)
	add(corev1.TaintNodeMemoryPressure, corev1.TaintEffectNoSchedule)
	add(corev1.TaintNodePIDPressure, corev1.TaintEffectNoSchedule)
	add(corev1.TaintNodeUnschedulable, corev1.TaintEffectNoSchedule)
	if spec.HostNetwork {
		add(corev1.TaintNodeNetworkUnavailable, corev1.TaintEffectNoSchedule)
	}
}

// pinToNode is a with its required node affinity replaced by matchFields metadata.name In
// [node] (kube's ReplaceDaemonSetPodNodeNameNodeAffinity).
func pinToNode(a *corev1.Affinity, node string) *corev1.Affinity {
	sel := &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: metav1.ObjectNameField, Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
	}}}
	if a == nil {
		a = &corev1.Affinity{}
	}
	if a.NodeAffinity == nil {
		a.NodeAffinity = &corev1.NodeAffinity{}
	}
	a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = sel
	return a
}

// FollowNodes watches the Nodes until ctx is done and, on every change of one, enqueues
// every DaemonSet (a new Node wants their Pods, a taint or label may move them), as kube's
// DaemonSet controller's Node event handlers do.
func (r *DaemonSets) FollowNodes(ctx context.Context, w Watcher, enqueue func(cache.Key) bool) {
	cache.Follow(ctx, w, cache.WatchOptions{Resources: []cache.GroupResource{NodeResource}}, func(cache.Event) {
		l, err := r.cfg.Client.List(ctx, DaemonSetResource)
		if err != nil {
			return
		}
		for _, o := range l.Items {
			enqueue(o.Key())
		}
	})
}
