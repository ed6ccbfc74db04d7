package nodes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/stages"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// kube-controller-manager's defaults for the node lifecycle, taint eviction and pod GC
// controllers.
const (
	// MonitorGracePeriod is how long a Node may post no heartbeat (neither its Ready
	// condition's lastHeartbeatTime nor its Lease's renewTime moves) before its conditions
	// become Unknown (--node-monitor-grace-period).
	MonitorGracePeriod = 50 * time.Second
	// StartupGracePeriod is MonitorGracePeriod for a Node that never posted a Ready condition
	// (--node-startup-grace-period).
	StartupGracePeriod = time.Minute
	// OrphanQuarantine is how long the Pods of a deleted Node wait before the pod GC deletes
	// them (kube's PodGC quarantineTime).
	OrphanQuarantine = 40 * time.Second
)

// LifecycleClient is how the node lifecycle controller reads and writes: the in-process API
// client (registry.Client).
type LifecycleClient interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Delete(ctx context.Context, key cache.Key, pre cache.Preconditions) (*cache.Object, bool, error)
	DeleteWithGrace(ctx context.Context, key cache.Key, pre cache.Preconditions, grace int64) (*cache.Object, bool, error)
}

// LifecycleConfig configures Lifecycle. Client is required; zero values are documented
// defaults.
type LifecycleConfig struct {
	Client LifecycleClient
	// Events records the controllers' Events (NodeNotReady, TaintManagerEviction). Nil: they
	// are dropped.
	Events stages.Recorder
	// Clock nil means the real clock.
	Clock clock.PassiveClock
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

// The field managers of Lifecycle's writes, as kube-controller-manager names them.
const (
	LifecycleManager = "node-controller"
	evictionSource   = "taint-eviction-controller"
)

// Lifecycle is kube-controller-manager's node lifecycle controller, with its taint eviction
// and pod GC parts for Nodes, written again (k8s.io/kubernetes is not importable), as one
// Reconciler over Nodes. A pass over a Node:
//   - health (monitorNodeHealth): when neither the Ready condition's lastHeartbeatTime nor
//     the Node's Lease's renewTime is newer than MonitorGracePeriod (StartupGracePeriod for a
//     Node without a Ready condition), its kubelet's conditions become Unknown, reason
//     NodeStatusUnknown, "Kubelet stopped posting node status.";
//   - taints: node.kubernetes.io/not-ready (Ready False) or unreachable (Ready Unknown) with
//     effect NoExecute (timeAdded now) and NoSchedule, memory-, disk- and pid-pressure and
//     unschedulable (cordon) NoSchedule, as the conditions and spec.unschedulable say; taints
//     of other keys are kept;
//   - Pods on a Node not Ready get Ready=False (MarkPodsNotReady; a NodeNotReady Event on the
//     Node when it turns);
//   - taint eviction: a Pod that does not tolerate a NoExecute taint of its Node is deleted at
//     once, one that tolerates them all for a while (the 300 s tolerations admission gives every
//     Pod) when the shortest tolerationSeconds has passed since its first pass here, with the
//     DisruptionTarget condition and a TaintManagerEviction Event; a taint removed in time
//     cancels it;
//   - a deleted Node's Pods (pod GC): after OrphanQuarantine, each marked Failed with
//     DisruptionTarget (DeletionByPodGC) and deleted at once.
//
// Times are the clock's, from the stored heartbeats, so a stepped clock steps them; the
// evictions' first passes are kept in memory (as kube's taint eviction queue keeps them).
type Lifecycle struct {
	cfg LifecycleConfig

	mu sync.Mutex
	// seen is when each Pod was first found on a tainted Node (its eviction counts from it).
	seen map[cache.Key]time.Time
	// gone is when each deleted Node was first found gone.
	gone map[string]time.Time
	// ready is each Node's Ready status last seen (a turn records NodeNotReady).
	ready map[string]corev1.ConditionStatus
	// unhealthy are the Nodes with NoExecute taints or not Ready: a Pod bound to one enqueues it.
	unhealthy map[string]bool
}

var _ reconciler.Reconciler = (*Lifecycle)(nil)

// NodesResource is the resource Lifecycle reconciles.
var NodesResource = cache.GroupResource{Resource: "nodes"}

// NewLifecycle returns the node lifecycle controller of cfg.
func NewLifecycle(cfg LifecycleConfig) (*Lifecycle, error) {
	if cfg.Client == nil {
		return nil, errors.New("nodes: Lifecycle needs a Client")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	l := &Lifecycle{cfg: cfg}
	l.Reset()
	return l, nil
}

// Reset forgets what the controller remembers (a new term starts from what is stored).
func (l *Lifecycle) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen, l.gone = map[cache.Key]time.Time{}, map[string]time.Time{}
	l.ready, l.unhealthy = map[string]corev1.ConditionStatus{}, map[string]bool{}
}

// ForgetSchedules forgets when evictions and orphans are due (a clock set back).
func (l *Lifecycle) ForgetSchedules() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.seen)
	clear(l.gone)
}

// Reconcile does one pass over the Node at key.
func (l *Lifecycle) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	now := l.cfg.Clock.Now()
	obj, err := l.cfg.Client.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return l.orphans(ctx, key.Name, now)
	}
	if err != nil {
		return reconciler.Result{}, err
	}
	l.mu.Lock()
	delete(l.gone, key.Name)
	l.mu.Unlock()
	var node corev1.Node
	if err := decode(obj, &node); err != nil {
		return reconciler.Result{}, reconciler.TerminalError(err)
	}
	wait, err := l.health(ctx, obj, &node, now)
	if err != nil {
		return reconciler.Result{}, err
	}
	if err := l.taint(ctx, &node, now); err != nil {
		return reconciler.Result{}, err
	}
	evictIn, err := l.pods(ctx, &node, now)
	if err != nil {
		return reconciler.Result{}, err
	}
	if evictIn > 0 && (wait == 0 || evictIn < wait) {
		wait = evictIn
	}
	return reconciler.Result{RequeueAfter: wait}, nil
}

// health marks the kubelet's conditions Unknown when the Node's heartbeat is older than its
// grace period, and otherwise returns when it will be.
func (l *Lifecycle) health(ctx context.Context, obj *cache.Object, node *corev1.Node, now time.Time) (time.Duration, error) {
	last, grace := node.CreationTimestamp.Time, StartupGracePeriod
	ready := condition(node.Status.Conditions, corev1.NodeReady)
	if ready != nil {
		last, grace = ready.LastHeartbeatTime.Time, MonitorGracePeriod
	}
	if lo, err := l.cfg.Client.Get(ctx, leaseKey(node.Name)); err == nil {
		var lease coordinationv1.Lease
		if decode(lo, &lease) == nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(last) {
			last = lease.Spec.RenewTime.Time
		}
	} else if !errors.Is(err, cache.ErrNotFound) {
		return 0, err
	}
	if due := last.Add(grace); now.Before(due) {
		return due.Sub(now), nil
	}
	if ready != nil && ready.Status == corev1.ConditionUnknown {
		return 0, nil // marked already; a heartbeat brings it back
	}
	reason, message := "NodeStatusUnknown", "Kubelet stopped posting node status."
	if ready == nil {
		reason, message = "NodeStatusNeverUpdated", "Kubelet never posted node status."
	}
	stamp := metav1.NewTime(now)
	for _, typ := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		c := condition(node.Status.Conditions, typ)
		if c == nil {
			node.Status.Conditions = append(node.Status.Conditions, corev1.NodeCondition{Type: typ, Status: corev1.ConditionUnknown,
				Reason: reason, Message: message, LastHeartbeatTime: node.CreationTimestamp, LastTransitionTime: stamp})
			continue
		}
		if c.Status != corev1.ConditionUnknown {
			c.Status, c.Reason, c.Message, c.LastTransitionTime = corev1.ConditionUnknown, "NodeStatusUnknown", "Kubelet stopped posting node status.", stamp
		}
	}
	node.ResourceVersion = fmt.Sprint(obj.ResourceVersion())
	body, err := toMap(node)
	if err != nil {
		return 0, reconciler.TerminalError(err)
	}
	stored, err := l.cfg.Client.UpdateStatus(ctx, obj.Key(), body)
	if err != nil {
		return 0, err
	}
	node.ResourceVersion = fmt.Sprint(stored.ResourceVersion())
	return 0, nil
}

// conditionTaints are the NoSchedule taints kube's node lifecycle controller keeps from a
// Node's conditions (TaintNodesByCondition), by condition and status.
var conditionTaints = map[corev1.NodeConditionType]map[corev1.ConditionStatus]string{
	corev1.NodeReady:              {corev1.ConditionFalse: corev1.TaintNodeNotReady, corev1.ConditionUnknown: corev1.TaintNodeUnreachable},
	corev1.NodeMemoryPressure:     {corev1.ConditionTrue: corev1.TaintNodeMemoryPressure},
	corev1.NodeDiskPressure:       {corev1.ConditionTrue: corev1.TaintNodeDiskPressure},
	corev1.NodeNetworkUnavailable: {corev1.ConditionTrue: corev1.TaintNodeNetworkUnavailable},
	corev1.NodePIDPressure:        {corev1.ConditionTrue: corev1.TaintNodePIDPressure},
}

// managedTaint reports whether the controller owns t: its keys with its effects.
func managedTaint(t corev1.Taint) bool {
	switch t.Key {
	case corev1.TaintNodeNotReady, corev1.TaintNodeUnreachable:
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	case corev1.TaintNodeMemoryPressure, corev1.TaintNodeDiskPressure, corev1.TaintNodeNetworkUnavailable,
		corev1.TaintNodePIDPressure, corev1.TaintNodeUnschedulable:
		return t.Effect == corev1.TaintEffectNoSchedule
	}
	return false
}

// wantTaints are the taints the controller wants on node, timeAdded now for new NoExecute ones.
func wantTaints(node *corev1.Node, now time.Time) []corev1.Taint {
	var want []corev1.Taint
	for _, c := range node.Status.Conditions {
		if key, ok := conditionTaints[c.Type][c.Status]; ok {
			want = append(want, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoSchedule})
		}
	}
	if node.Spec.Unschedulable {
		want = append(want, corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule})
	}
	if r := condition(node.Status.Conditions, corev1.NodeReady); r != nil && r.Status != corev1.ConditionTrue {
		key := corev1.TaintNodeNotReady
		if r.Status == corev1.ConditionUnknown {
			key = corev1.TaintNodeUnreachable
		}
		want = append(want, corev1.Taint{Key: key, Effect: corev1.TaintEffectNoExecute, TimeAdded: &metav1.Time{Time: now}})
	}
	return want
}

// taint brings the Node's managed taints to what its conditions say (one update, taints of
// other keys kept, a kept taint keeping its timeAdded), and records a NodeNotReady Event when
// Ready turns.
func (l *Lifecycle) taint(ctx context.Context, node *corev1.Node, now time.Time) error {
	r := condition(node.Status.Conditions, corev1.NodeReady)
	status := corev1.ConditionUnknown
	if r != nil {
		status = r.Status
	}
	l.mu.Lock()
	was, known := l.ready[node.Name]
	l.ready[node.Name] = status
	l.mu.Unlock()
	if status != corev1.ConditionTrue && (!known || was == corev1.ConditionTrue) && r != nil {
		l.record(ctx, events.Event{Object: nodeRef(node), Type: events.TypeNormal, Reason: "NodeNotReady",
			Message: fmt.Sprintf("Node %s status is now: NodeNotReady", node.Name), Source: LifecycleManager})
	}
	want := wantTaints(node, now)
	var out []corev1.Taint
	for _, t := range node.Spec.Taints {
		if !managedTaint(t) {
			out = append(out, t)
		}
	}
	for _, w := range want {
		if i := slices.IndexFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&w) }); i >= 0 {
			w = node.Spec.Taints[i]
		}
		out = append(out, w)
	}
	same := len(out) == len(node.Spec.Taints) && !slices.ContainsFunc(out, func(t corev1.Taint) bool {
		return !slices.ContainsFunc(node.Spec.Taints, func(h corev1.Taint) bool { return h.MatchTaint(&t) })
	})
	if same {
		return nil
	}
	node.Spec.Taints = out
	body, err := toMap(node)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	stored, err := l.cfg.Client.Update(ctx, nodeKey(node.Name), body)
	if err != nil {
		return err
	}
	node.ResourceVersion = fmt.Sprint(stored.ResourceVersion())
	return nil
}

// pods marks the Node's Pods not ready when it is not, and evicts those its NoExecute taints
// are due to evict; it returns when the next eviction is due (0: none).
func (l *Lifecycle) pods(ctx context.Context, node *corev1.Node, now time.Time) (time.Duration, error) {
	r := condition(node.Status.Conditions, corev1.NodeReady)
	notReady := r != nil && r.Status != corev1.ConditionTrue
	var noExecute []corev1.Taint
	for _, t := range node.Spec.Taints {
		if t.Effect == corev1.TaintEffectNoExecute {
			noExecute = append(noExecute, t)
		}
	}
	l.mu.Lock()
	if notReady || len(noExecute) > 0 {
		l.unhealthy[node.Name] = true
	} else {
		delete(l.unhealthy, node.Name)
	}
	l.mu.Unlock()
	if !notReady && len(noExecute) == 0 && !l.waiting() {
		return 0, nil
	}
	list, err := l.cfg.Client.List(ctx, PodsResource, cache.MatchingFields(fields.OneTermEqualSelector("spec.nodeName", node.Name)))
	if err != nil {
		return 0, err
	}
	var next time.Duration
	for _, o := range list.Items {
		var pod corev1.Pod
		if decode(o, &pod) != nil || pod.Spec.NodeName != node.Name {
			continue
		}
		if notReady {
			if err := l.markNotReady(ctx, o, &pod, now); err != nil {
				return 0, err
			}
		}
		wait, err := l.evict(ctx, o, &pod, noExecute, now)
		if err != nil {
			return 0, err
		}
		if wait > 0 && (next == 0 || wait < next) {
			next = wait
		}
	}
	return next, nil
}

// waiting reports whether a Pod (of any Node) waits for its eviction: a Node whose taints went
// lists its Pods to cancel theirs.
func (l *Lifecycle) waiting() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.seen) > 0
}

// markNotReady writes pod's Ready condition False, as kube's MarkPodsNotReady does, unless
// it is not True.
func (l *Lifecycle) markNotReady(ctx context.Context, obj *cache.Object, pod *corev1.Pod, now time.Time) error {
	c := podCondition(pod.Status.Conditions, corev1.PodReady)
	if c == nil || c.Status != corev1.ConditionTrue || obj.Deleting() {
		return nil
	}
	c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.NewTime(now)
	if err := l.writePodStatus(ctx, obj, pod); err != nil {
		return err
	}
	l.record(ctx, events.Event{Object: podRef(pod), Type: events.TypeWarning, Reason: "NodeNotReady",
		Message: "Node is not ready", Source: LifecycleManager})
	return nil
}

// evict is kube's taint eviction for one Pod: at once when a NoExecute taint is not tolerated,
// else when the shortest tolerationSeconds has passed since the Pod was first seen tainted.
// It returns how long until then (0: nothing waits).
func (l *Lifecycle) evict(ctx context.Context, obj *cache.Object, pod *corev1.Pod, taints []corev1.Taint, now time.Time) (time.Duration, error) {
	key := obj.Key()
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	l.mu.Lock()
	since, scheduled := l.seen[key]
	l.mu.Unlock()
	if len(taints) == 0 || obj.Deleting() || finished {
		l.cancel(ctx, key, pod, scheduled && len(taints) == 0)
		return 0, nil
	}
	wait, tolerated := tolerationWait(pod.Spec.Tolerations, taints)
	if tolerated && wait < 0 {
		l.cancel(ctx, key, pod, scheduled)
		return 0, nil // tolerated for ever
	}
	if tolerated {
		if !scheduled {
			since = now
			l.mu.Lock()
			l.seen[key] = now
			l.mu.Unlock()
		}
		if due := since.Add(wait); now.Before(due) {
			return due.Sub(now), nil
		}
	}
	l.record(ctx, events.Event{Object: podRef(pod), Type: events.TypeNormal, Reason: "TaintManagerEviction",
		Message: fmt.Sprintf("Marking for deletion Pod %s/%s", pod.Namespace, pod.Name), Source: evictionSource})
	setPodCondition(pod, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
		Reason: "DeletionByTaintManager", Message: "Taint manager: deleting due to NoExecute taint"}, now)
	if err := l.writePodStatus(ctx, obj, pod); err != nil {
		return 0, err
	}
	if _, _, err := l.cfg.Client.Delete(ctx, key, cache.Preconditions{UID: obj.UID()}); err != nil && !errors.Is(err, cache.ErrNotFound) {
		return 0, err
	}
	l.mu.Lock()
	delete(l.seen, key)
	l.mu.Unlock()
	return 0, nil
}

// cancel forgets a Pod's eviction; tell records kube's Event for one cancelled.
func (l *Lifecycle) cancel(ctx context.Context, key cache.Key, pod *corev1.Pod, tell bool) {
	l.mu.Lock()
	_, ok := l.seen[key]
	delete(l.seen, key)
	l.mu.Unlock()
	if ok && tell {
		l.record(ctx, events.Event{Object: podRef(pod), Type: events.TypeNormal, Reason: "TaintManagerEviction",
			Message: fmt.Sprintf("Cancelling deletion of Pod %s/%s", pod.Namespace, pod.Name), Source: evictionSource})
	}
}

// tolerationWait is kube's getMinTolerationTime over the tolerations that match taints: false
// when one taint is not tolerated; a negative wait when every matching toleration lasts for
// ever.
func tolerationWait(tolerations []corev1.Toleration, taints []corev1.Taint) (time.Duration, bool) {
	var used []corev1.Toleration
	for i := range taints {
		matched := false
		for _, t := range tolerations {
			if t.ToleratesTaint(klog.Background(), &taints[i], false) {
				used, matched = append(used, t), true
			}
		}
		if !matched {
			return 0, false
		}
	}
	wait := time.Duration(-1)
	for _, t := range used {
		if t.TolerationSeconds == nil {
			continue
		}
		d := time.Duration(max(*t.TolerationSeconds, 0)) * time.Second
		if wait < 0 || d < wait {
			wait = d
		}
	}
	return wait, true
}

// orphans is kube's pod GC for the deleted Node name: its Pods are deleted once it has been
// gone OrphanQuarantine, each marked Failed (unless finished) with DisruptionTarget.
func (l *Lifecycle) orphans(ctx context.Context, name string, now time.Time) (reconciler.Result, error) {
	l.mu.Lock()
	delete(l.ready, name)
	delete(l.unhealthy, name)
	since, ok := l.gone[name]
	if !ok {
		since = now
		l.gone[name] = now
	}
	l.mu.Unlock()
	if due := since.Add(OrphanQuarantine); now.Before(due) {
		return reconciler.Result{RequeueAfter: due.Sub(now)}, nil
	}
	list, err := l.cfg.Client.List(ctx, PodsResource, cache.MatchingFields(fields.OneTermEqualSelector("spec.nodeName", name)))
	if err != nil {
		return reconciler.Result{}, err
	}
	for _, o := range list.Items {
		var pod corev1.Pod
		if decode(o, &pod) != nil || pod.Spec.NodeName != name {
			continue
		}
		if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
			pod.Status.Phase = corev1.PodFailed
		}
		setPodCondition(&pod, corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue,
			Reason: "DeletionByPodGC", Message: "PodGC: node no longer exists"}, now)
		if err := l.writePodStatus(ctx, o, &pod); err != nil && !errors.Is(err, cache.ErrNotFound) {
			return reconciler.Result{}, err
		}
		if _, _, err := l.cfg.Client.DeleteWithGrace(ctx, o.Key(), cache.Preconditions{UID: o.UID()}, 0); err != nil && !errors.Is(err, cache.ErrNotFound) {
			return reconciler.Result{}, err
		}
	}
	l.mu.Lock()
	delete(l.gone, name)
	l.mu.Unlock()
	return reconciler.Result{}, nil
}

// writePodStatus writes pod's status, conditional on obj's version.
func (l *Lifecycle) writePodStatus(ctx context.Context, obj *cache.Object, pod *corev1.Pod) error {
	pod.ResourceVersion = fmt.Sprint(obj.ResourceVersion())
	body, err := toMap(pod)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	_, err = l.cfg.Client.UpdateStatus(ctx, obj.Key(), body)
	return err
}

func (l *Lifecycle) record(ctx context.Context, ev events.Event) {
	if l.cfg.Events != nil {
		l.cfg.Events.Record(ctx, ev)
	}
}

// setPodCondition sets c on pod (its transition time now when its status changes).
func setPodCondition(pod *corev1.Pod, c corev1.PodCondition, now time.Time) {
	c.LastTransitionTime = metav1.NewTime(now)
	pod.Status.Conditions = setCondition(pod.Status.Conditions, c)
}

func nodeRef(n *corev1.Node) events.Ref {
	return events.Ref{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: string(n.UID)}
}

func podRef(p *corev1.Pod) events.Ref {
	return events.Ref{APIVersion: "v1", Kind: "Pod", Namespace: p.Namespace, Name: p.Name, UID: string(p.UID)}
}

// Follow watches the Nodes and Pods until ctx is done: it enqueues a Node on each of its
// writes (its status too, which the controller's own watch does not tell), and the Node of a
// Pod that changes on a Node not Ready or tainted NoExecute, as kube's controllers hear of a
// Pod bound there.
func (l *Lifecycle) Follow(ctx context.Context, w Watcher, enqueue func(cache.Key) bool) {
	opts := cache.WatchOptions{Resources: []cache.GroupResource{NodesResource, PodsResource}}
	cache.Follow(ctx, w, opts, func(ev cache.Event) {
		key := ev.Object.Key()
		if key.Resource == NodesResource.Resource {
			enqueue(key)
			return
		}
		if ev.Type == cache.Deleted {
			return
		}
		l.mu.Lock()
		some := len(l.unhealthy) > 0
		l.mu.Unlock()
		if !some {
			return
		}
		node := ev.Object.Field("spec.nodeName")
		l.mu.Lock()
		hit := l.unhealthy[node]
		l.mu.Unlock()
		if hit {
			enqueue(nodeKey(node))
		}
	})
}
