// Package disruption is kube-controller-manager's disruption controller: it keeps each
// PodDisruptionBudget's status (expectedPods, desiredHealthy, currentHealthy,
// disruptionsAllowed, disruptedPods, the DisruptionAllowed condition, observedGeneration) from
// the Pods its selector takes, which the eviction subresource (registry.Store.Evict) reads. It
// runs on the leader with the controllers, as a reconciler.Controller over budgets plus a watch
// of Pods (a Pod's change enqueues the budgets of its namespace that select it).
package disruption

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
)

// Name is the controller's name, as Kubernetes names it.
const Name = "disruption-controller"

// DeletionTimeout is how long an eviction stays in disruptedPods waiting for its Pod to go, as
// kube's controller has it.
const DeletionTimeout = 2 * time.Minute

// Client is how the controller reads and writes: the in-process API client.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
}

var (
	budgets = cache.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}
	pods    = cache.GroupResource{Resource: "pods"}
)

// Config configures the controller. Client is required.
type Config struct {
	Client Client
	Tuning reconciler.Tuning
	// Clock times disruptedPods. Nil means the real clock.
	Clock clock.PassiveClock
}

// Controller keeps the budgets' status. Create it with New.
type Controller struct {
	cfg  Config
	ctrl *reconciler.Controller
}

// New makes the disruption controller.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("disruption: Client is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	c := &Controller{cfg: cfg}
	ctrl, err := reconciler.New(reconciler.Config{Store: cfg.Client, Resource: budgets, Reconciler: c, Name: "disruption", Tuning: cfg.Tuning})
	if err != nil {
		return nil, err
	}
	c.ctrl = ctrl
	return c, nil
}

// Run runs the controller and its watch of Pods until ctx is done.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.watchPods(ctx) })
	err := c.ctrl.Run(ctx)
	cancel()
	wg.Wait()
	return err
}

// watchPods enqueues the budgets that select a Pod that changed.
func (c *Controller) watchPods(ctx context.Context) {
	cache.Follow(ctx, c.cfg.Client, cache.WatchOptions{Resources: []cache.GroupResource{pods}}, func(ev cache.Event) {
		if ev.Object == nil {
			return
		}
		// The budgets first: a namespace without one (most Pods' namespace) costs no decode.
		l, err := c.cfg.Client.List(ctx, budgets, cache.InNamespace(ev.Object.Key().Namespace))
		if err != nil || len(l.Items) == 0 {
			return
		}
		var pod corev1.Pod
		if json.Unmarshal(ev.Object.Raw(), &pod) != nil {
			return
		}
		for _, o := range l.Items {
			var pdb policyv1.PodDisruptionBudget
			if json.Unmarshal(o.Raw(), &pdb) != nil {
				continue
			}
			if sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err == nil && sel.Matches(labels.Set(pod.Labels)) {
				c.ctrl.Enqueue(o.Key())
			}
		}
	})
}

// Reconcile writes the status of the budget at key from its Pods (kube's trySync).
func (c *Controller) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	obj, err := c.cfg.Client.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return reconciler.Result{}, nil
	}
	if err != nil {
		return reconciler.Result{}, err
	}
	var pdb policyv1.PodDisruptionBudget
	if err := json.Unmarshal(obj.Raw(), &pdb); err != nil {
		return reconciler.Result{}, reconciler.TerminalError(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil {
		return reconciler.Result{}, reconciler.TerminalError(err)
	}
	l, err := c.cfg.Client.List(ctx, pods, cache.InNamespace(key.Namespace), cache.MatchingLabels(sel))
	if err != nil {
		return reconciler.Result{}, err
	}
	var selected []*corev1.Pod
	for _, o := range l.Items {
		var p corev1.Pod
		if json.Unmarshal(o.Raw(), &p) == nil {
			selected = append(selected, &p)
		}
	}
	now := c.cfg.Clock.Now()
	expected, desired := c.expected(ctx, &pdb, selected)
	disrupted, recheck := disruptedPods(&pdb, selected, now)
	healthy := int32(0)
	for _, p := range selected {
		if p.DeletionTimestamp != nil {
			continue
		}
		if _, ok := disrupted[p.Name]; ok {
			continue
		}
		if ready(p) {
			healthy++
		}
	}
	allowed := max(healthy-desired, 0)
	if expected <= 0 {
		allowed = 0
	}
	st := pdb.Status.DeepCopy()
	st.ExpectedPods, st.DesiredHealthy, st.CurrentHealthy, st.DisruptionsAllowed = expected, desired, healthy, allowed
	st.DisruptedPods = disrupted
	st.ObservedGeneration = pdb.Generation
	cond := metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionTrue, Reason: policyv1.SufficientPodsReason,
		ObservedGeneration: pdb.Generation, LastTransitionTime: metav1.NewTime(now)}
	if allowed == 0 {
		cond.Status, cond.Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
	}
	setCondition(&st.Conditions, cond)
	var res reconciler.Result
	if !recheck.IsZero() {
		res.RequeueAfter = recheck.Sub(now)
	}
	if equalJSON(st, &pdb.Status) {
		return res, nil
	}
	pdb.Status = *st
	pdb.ResourceVersion = strconv.FormatUint(obj.ResourceVersion(), 10)
	raw, err := json.Marshal(&pdb)
	if err != nil {
		return reconciler.Result{}, reconciler.TerminalError(err)
	}
	body, err := cache.DecodeJSON(raw)
	if err != nil {
		return reconciler.Result{}, reconciler.TerminalError(err)
	}
	_, err = c.cfg.Client.UpdateStatus(ctx, key, body)
	return res, err
}

// expected is kube's getExpectedPodCount: with an integer minAvailable, the Pods selected and
// minAvailable; otherwise the scale of the Pods' controllers (a Deployment's replicas for the
// Pods of its ReplicaSets, a ReplicaSet's or StatefulSet's own) and what maxUnavailable or a
// percentage of minAvailable leaves of it.
func (c *Controller) expected(ctx context.Context, pdb *policyv1.PodDisruptionBudget, selected []*corev1.Pod) (expected, desired int32) {
	if mu := pdb.Spec.MaxUnavailable; mu != nil {
		expected = c.scale(ctx, selected)
		n, err := intstr.GetScaledValueFromIntOrPercent(mu, int(expected), true)
		if err != nil {
			return expected, expected
		}
		return expected, max(expected-int32(n), 0)
	}
	ma := pdb.Spec.MinAvailable
	if ma == nil {
		return int32(len(selected)), 0
	}
	if ma.Type == intstr.Int {
		return int32(len(selected)), ma.IntVal
	}
	expected = c.scale(ctx, selected)
	n, err := intstr.GetScaledValueFromIntOrPercent(ma, int(expected), true)
	if err != nil {
		return expected, expected
	}
	return expected, int32(n)
}

// scale sums the replicas of the selected Pods' controllers, each once.
func (c *Controller) scale(ctx context.Context, selected []*corev1.Pod) int32 {
	seen := map[string]bool{}
	total := int32(0)
	for _, p := range selected {
		ref := metav1.GetControllerOfNoCopy(p)
		if ref == nil {
			continue
		}
		key := cache.Key{Namespace: p.Namespace, Name: ref.Name}
		switch ref.Kind {
		case "ReplicaSet":
			key.Group, key.Resource = "apps", "replicasets"
		case "StatefulSet":
			key.Group, key.Resource = "apps", "statefulsets"
		case "ReplicationController":
			key.Resource = "replicationcontrollers"
		default:
			continue
		}
		obj, err := c.cfg.Client.Get(ctx, key)
		if err != nil {
			continue
		}
		var owner struct {
			metav1.ObjectMeta `json:"metadata"`
			Spec              struct {
				Replicas *int32 `json:"replicas"`
			} `json:"spec"`
		}
		if json.Unmarshal(obj.Raw(), &owner) != nil {
			continue
		}
		id, replicas := string(owner.UID), owner.Spec.Replicas
		if dref := metav1.GetControllerOfNoCopy(&owner.ObjectMeta); ref.Kind == "ReplicaSet" && dref != nil && dref.Kind == "Deployment" {
			dobj, err := c.cfg.Client.Get(ctx, cache.Key{Group: "apps", Resource: "deployments", Namespace: p.Namespace, Name: dref.Name})
			if err != nil {
				continue
			}
			var d appsv1.Deployment
			if json.Unmarshal(dobj.Raw(), &d) != nil {
				continue
			}
			id, replicas = string(d.UID), d.Spec.Replicas
		}
		if seen[id] {
			continue
		}
		seen[id] = true
		if replicas == nil {
			total++
		} else {
			total += *replicas
		}
	}
	return total
}

// disruptedPods is kube's buildDisruptedPodMap: the evictions still waiting for their Pod to
// go, DeletionTimeout at most, and when the next of them expires.
func disruptedPods(pdb *policyv1.PodDisruptionBudget, selected []*corev1.Pod, now time.Time) (map[string]metav1.Time, time.Time) {
	var out map[string]metav1.Time
	var recheck time.Time
	for _, p := range selected {
		if p.DeletionTimestamp != nil {
			continue
		}
		at, ok := pdb.Status.DisruptedPods[p.Name]
		if !ok {
			continue
		}
		expires := at.Add(DeletionTimeout)
		if !now.Before(expires) {
			continue
		}
		if out == nil {
			out = map[string]metav1.Time{}
		}
		out[p.Name] = at
		if recheck.IsZero() || expires.Before(recheck) {
			recheck = expires
		}
	}
	return out, recheck
}

func ready(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// setCondition sets c in cs, keeping its transition time when its status did not change.
func setCondition(cs *[]metav1.Condition, c metav1.Condition) {
	for i := range *cs {
		if (*cs)[i].Type == c.Type {
			if (*cs)[i].Status == c.Status {
				c.LastTransitionTime = (*cs)[i].LastTransitionTime
			}
			(*cs)[i] = c
			return
		}
	}
	*cs = append(*cs, c)
}

func equalJSON(a, b any) bool {
	ra, err1 := json.Marshal(a)
	rb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(ra) == string(rb)
}
