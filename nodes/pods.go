package nodes

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/stages"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kwok/pkg/apis/v1alpha1"
)

// PodClient is how the scheduler and the kubelets read and write Pods: the in-process API
// client (registry.Client).
type PodClient interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Patch(ctx context.Context, key cache.Key, sub, patchType string, body []byte) (*cache.Object, error)
	Bind(ctx context.Context, key cache.Key, b registry.Binding) (*cache.Object, error)
	DeleteWithGrace(ctx context.Context, key cache.Key, pre cache.Preconditions, grace int64) (*cache.Object, bool, error)
}

// PodsResource is the resource Pods reconciles.
var PodsResource = cache.GroupResource{Resource: "pods"}

// SchedulerManager is the field manager of the scheduler's and the kubelets' writes of Pods.
const SchedulerManager = "default-scheduler"

// DefaultScheduler is the schedulerName the simulated scheduler serves, kube-scheduler's.
const DefaultScheduler = "default-scheduler"

// UnschedulableRetry is how long an unschedulable Pod waits before it is tried again, on the
// clock (kube-scheduler retries on cluster events, at the latest after 5 minutes).
const UnschedulableRetry = 10 * time.Second

// Pods is kube-scheduler and the Nodes' kubelets, simulated, as one Reconciler over Pods (for
// a reconciler.Controller: its queue, leader gate, pause and step). A pass over a Pod:
//   - unbound, for the default scheduler: the first of these Nodes (in order) that fits it, as
//     kube-scheduler's default filters judge (cordon, taints and tolerations, nodeSelector and
//     required node affinity, requests against allocatable and maxPods) gets it through the
//     binding (registry.Client.Bind: spec.nodeName, PodScheduled=True); when none fits, the
//     PodScheduled=False condition (reason Unschedulable, kube-scheduler's message) and another
//     try after UnschedulableRetry;
//   - bound to one of these Nodes: its kubelet plays the kwok Stages stored in the API
//     (stages.Engine: kwok's default pod-ready, pod-complete and pod-delete unless replaced),
//     with the template functions NodeIP, NodeIPWith, NodeIPsWith, PodIPWith and PodIPsWith
//     answering from these Nodes (a pod IP from the Node's CIDR, held while the Pod runs).
//
// What the bound Pods use is kept in memory per Node (rebuilt from a list of Pods on first use
// in a term: Reset), so a pass costs no list.
type Pods struct {
	cfg    PodsConfig
	index  map[string]int // the Nodes' names → their index (pod CIDR 10.244.<index>.0/24)
	client PodClient
	stages *stages.Engine

	// mu guards the rest.
	mu     sync.Mutex
	loaded bool
	used   map[string]*usage // by Node
	placed map[cache.Key]placement
	// waiting are the Pods no Node fitted: a Node's change tries them again (FollowNodes).
	waiting map[cache.Key]struct{}
	// down are the Nodes whose kubelet is stopped or not ready (KubeletAnnotation), and held
	// the Pods on them a pass left as they were: the kubelet's start enqueues them again.
	down map[string]bool
	held map[cache.Key]string // by the Node they are on

	// nodesMu guards decoded: the Nodes as the last scheduling pass decoded them, by name.
	nodesMu sync.Mutex
	decoded map[string]decodedNode
}

// PodsConfig configures Pods. Client and Nodes are required.
type PodsConfig struct {
	Client PodClient
	// Nodes are the Nodes whose Pods are scheduled and run here.
	Nodes *Nodes
	// Events records the Stages' events. Nil: they are dropped.
	Events stages.Recorder
	// StoredStages plays the Stages stored in the API (the Stage kind is served). False: kwok's
	// default Pod stages, built in, with StartDelay on pod-ready and CompleteDelay on pod-complete.
	StoredStages bool
	// StartDelay is pod-ready's delay in the built-in stages (StoredStages false). Zero: none.
	StartDelay time.Duration
	// CompleteDelay is pod-complete's delay in the built-in stages (StoredStages false): how
	// long a Job's running Pod runs before it succeeds. Zero: none.
	CompleteDelay time.Duration
}

var _ reconciler.Reconciler = (*Pods)(nil)

// NewPods returns the scheduler and kubelets of cfg.Nodes.
func NewPods(cfg PodsConfig) (*Pods, error) {
	if cfg.Client == nil || cfg.Nodes == nil {
		return nil, errors.New("nodes: Pods needs a Client and Nodes")
	}
	p := &Pods{cfg: cfg, client: cfg.Client, index: map[string]int{}}
	for i, n := range cfg.Nodes.names {
		p.index[n] = i
	}
	var fixed []*v1alpha1.Stage
	if !cfg.StoredStages {
		var err error
		if fixed, err = stages.Defaults(stages.Delays{Ready: cfg.StartDelay, Complete: cfg.CompleteDelay}); err != nil {
			return nil, err
		}
	}
	var err error
	p.stages, err = stages.New(stages.Config{Client: cfg.Client, Events: cfg.Events, Clock: cfg.Nodes.cfg.Clock, Funcs: p.funcs(), Fixed: fixed, Logger: cfg.Nodes.cfg.Logger})
	if err != nil {
		return nil, err
	}
	p.Reset()
	return p, nil
}

// Stages is the engine that plays the kwok Stages on these Nodes' Pods.
func (p *Pods) Stages() *stages.Engine { return p.stages }

// Reset forgets what the bound Pods use (a new term lists them again) and the Stages' plans.
func (p *Pods) Reset() {
	p.mu.Lock()
	p.loaded, p.used, p.placed = false, map[string]*usage{}, map[cache.Key]placement{}
	p.waiting, p.down, p.held = map[cache.Key]struct{}{}, map[string]bool{}, map[cache.Key]string{}
	p.mu.Unlock()
	p.stages.Reset()
}

// ForgetSchedules forgets when Pods are due (a clock set back).
func (p *Pods) ForgetSchedules() { p.stages.ForgetSchedules() }

// Reconcile does the next step of the Pod at key.
func (p *Pods) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	if err := p.load(ctx); err != nil {
		return reconciler.Result{}, err
	}
	obj, err := p.client.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		p.release(key)
		p.stages.Forget(key)
		return reconciler.Result{}, nil
	}
	if err != nil {
		return reconciler.Result{}, err
	}
	var pod corev1.Pod
	if err := decode(obj, &pod); err != nil {
		return reconciler.Result{}, reconciler.TerminalError(err)
	}
	now := p.cfg.Nodes.cfg.Clock.Now()
	if pod.Spec.NodeName == "" {
		if obj.Deleting() || pod.Spec.SchedulerName != DefaultScheduler {
			return reconciler.Result{}, nil
		}
		bound, res, err := p.schedule(ctx, obj, &pod, now)
		if bound == nil {
			return res, err
		}
		obj = bound
		if err := decode(obj, &pod); err != nil {
			return reconciler.Result{}, reconciler.TerminalError(err)
		}
	}
	if _, ours := p.index[pod.Spec.NodeName]; !ours {
		return reconciler.Result{}, nil // no kubelet here runs it
	}
	finished := pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if finished && !obj.Deleting() {
		p.release(key) // what a finished Pod requested is free again
	} else if !finished {
		p.account(key, &pod)
	}
	if p.hold(key, pod.Spec.NodeName) {
		return reconciler.Result{}, nil // its kubelet does nothing until it starts again
	}
	wait, deleted, err := p.stages.PlayPod(ctx, obj, &pod)
	if deleted {
		p.release(key)
		p.stages.Forget(key)
	}
	return reconciler.Result{RequeueAfter: wait}, err
}

// schedule binds pod to the first Node that fits it, or says why none does. It returns the
// bound Pod, or nil and the pass's result.
func (p *Pods) schedule(ctx context.Context, obj *cache.Object, pod *corev1.Pod, now time.Time) (*cache.Object, reconciler.Result, error) {
	l, err := p.client.List(ctx, cache.GroupResource{Resource: "nodes"})
	if err != nil {
		return nil, reconciler.Result{}, err
	}
	nodes := p.decodeNodes(l.Items)
	req := podRequests(pod)
	key := obj.Key()
	reasons, resolvable, total := map[string]int{}, false, len(nodes)
	p.mu.Lock()
	chosen := ""
	for _, name := range p.cfg.Nodes.names {
		n, ok := nodes[name]
		if !ok {
			continue
		}
		u := p.usage(name)
		why, res := fits(pod, req, n, u)
		if len(why) == 0 {
			chosen = name
			p.place(key, name, req)
			break
		}
		resolvable = resolvable || res
		for _, r := range why {
			reasons[r]++
		}
	}
	p.mu.Unlock()
	if chosen == "" {
		for name := range nodes {
			if _, ours := p.index[name]; !ours {
				reasons[reasonNoKubelet]++ // a Node no kubelet here serves
			}
		}
		p.mu.Lock()
		p.waiting[key] = struct{}{}
		p.mu.Unlock()
		msg := unschedulableMessage(total, reasons, resolvable)
		return nil, reconciler.Result{RequeueAfter: UnschedulableRetry}, p.unschedulable(ctx, obj, pod, msg, now)
	}
	bound, err := p.client.Bind(ctx, key, registry.Binding{Node: chosen, UID: obj.UID()})
	if err != nil {
		p.release(key)
		return nil, reconciler.Result{}, err
	}
	p.mu.Lock()
	delete(p.waiting, key)
	p.mu.Unlock()
	return bound, reconciler.Result{}, nil
}

// decodeNodes decodes the Nodes listed, by name. A Node unchanged since the last pass (same
// resourceVersion) is not decoded again: a scheduling pass reads every Node, and decoding them
// all was most of what scheduling 10,000 Pods onto 100 Nodes cost. The Nodes returned are
// shared: read them, never change them.
func (p *Pods) decodeNodes(items []*cache.Object) map[string]*corev1.Node {
	p.nodesMu.Lock()
	defer p.nodesMu.Unlock()
	next := make(map[string]decodedNode, len(items))
	nodes := make(map[string]*corev1.Node, len(items))
	for _, o := range items {
		d, ok := p.decoded[o.Key().Name]
		if !ok || d.rv != o.ResourceVersion() {
			var n corev1.Node
			if decode(o, &n) != nil {
				continue
			}
			d = decodedNode{rv: o.ResourceVersion(), node: &n}
		}
		next[d.node.Name] = d
		nodes[d.node.Name] = d.node
	}
	p.decoded = next
	return nodes
}

// decodedNode is a Node as decoded at resourceVersion rv.
type decodedNode struct {
	rv   uint64
	node *corev1.Node
}

// reasonNoKubelet is why a Node no kubelet here serves gets no Pod.
const reasonNoKubelet = "node(s) had no simulated kubelet"

// unschedulable writes pod's PodScheduled=False condition with msg, unless it says so.
func (p *Pods) unschedulable(ctx context.Context, obj *cache.Object, pod *corev1.Pod, msg string, now time.Time) error {
	c := podCondition(pod.Status.Conditions, corev1.PodScheduled)
	if c != nil && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable && c.Message == msg {
		return nil
	}
	want := corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: msg,
		LastTransitionTime: metav1.NewTime(now)}
	if c != nil && c.Status == corev1.ConditionFalse {
		want.LastTransitionTime = c.LastTransitionTime
	}
	pod.Status.Conditions = setCondition(pod.Status.Conditions, want)
	return p.writeStatus(ctx, obj, pod)
}

// writeStatus writes pod's status through the status subresource, conditional on obj's version.
func (p *Pods) writeStatus(ctx context.Context, obj *cache.Object, pod *corev1.Pod) error {
	pod.ResourceVersion = fmt.Sprint(obj.ResourceVersion())
	body, err := toMap(pod)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	_, err = p.client.UpdateStatus(ctx, obj.Key(), body)
	return err
}

// load accounts every bound, unfinished Pod on these Nodes, once per term.
func (p *Pods) load(ctx context.Context) error {
	p.mu.Lock()
	loaded := p.loaded
	p.mu.Unlock()
	if loaded {
		return nil
	}
	nl, err := p.client.List(ctx, cache.GroupResource{Resource: "nodes"})
	if err != nil {
		return err
	}
	for _, o := range nl.Items {
		p.noteNode(o)
	}
	l, err := p.client.List(ctx, PodsResource)
	if err != nil {
		return err
	}
	for _, o := range l.Items {
		var pod corev1.Pod
		if decode(o, &pod) != nil || pod.Spec.NodeName == "" || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if _, ours := p.index[pod.Spec.NodeName]; ours {
			p.account(o.Key(), &pod)
		}
	}
	p.mu.Lock()
	p.loaded = true
	p.mu.Unlock()
	return nil
}

// account counts pod, bound to one of these Nodes, in its Node's use unless it is, and returns
// its pod IP's last octet.
func (p *Pods) account(key cache.Key, pod *corev1.Pod) byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl, ok := p.placed[key]; ok {
		return pl.ip
	}
	return p.place(key, pod.Spec.NodeName, podRequests(pod))
}

// place counts a Pod's requests on node and gives it a pod IP; p.mu is held.
func (p *Pods) place(key cache.Key, node string, req corev1.ResourceList) byte {
	if pl, ok := p.placed[key]; ok {
		return pl.ip
	}
	u := p.usage(node)
	for name, q := range req {
		sum := u.requests[name]
		sum.Add(q)
		u.requests[name] = sum
	}
	u.pods++
	var ip byte
	for i := 2; i < 255; i++ {
		if !u.ips[i] {
			u.ips[i], ip = true, byte(i)
			break
		}
	}
	p.placed[key] = placement{node: node, requests: req, ip: ip}
	return ip
}

// usage is node's use; p.mu is held.
func (p *Pods) usage(node string) *usage {
	u, ok := p.used[node]
	if !ok {
		u = &usage{requests: corev1.ResourceList{}}
		p.used[node] = u
	}
	return u
}

// release takes the Pod at key out of its Node's use.
func (p *Pods) release(key cache.Key) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.waiting, key)
	delete(p.held, key)
	pl, ok := p.placed[key]
	if !ok {
		return
	}
	delete(p.placed, key)
	u := p.usage(pl.node)
	for name, q := range pl.requests {
		sum := u.requests[name]
		sum.Sub(q)
		u.requests[name] = sum
	}
	u.pods--
	if pl.ip != 0 {
		u.ips[pl.ip] = false
	}
}

// setCondition is cs with c in place of its type's condition (its transition time kept when
// its status did not change), or appended.
func setCondition(cs []corev1.PodCondition, c corev1.PodCondition) []corev1.PodCondition {
	i := slices.IndexFunc(cs, func(x corev1.PodCondition) bool { return x.Type == c.Type })
	if i < 0 {
		return append(cs, c)
	}
	if cs[i].Status == c.Status {
		c.LastTransitionTime = cs[i].LastTransitionTime
	}
	cs[i] = c
	return cs
}

// podCondition is pod's condition of typ, nil when it has none.
func podCondition(cs []corev1.PodCondition, typ corev1.PodConditionType) *corev1.PodCondition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}

// Watcher is how FollowNodes watches: the store, or the in-process client.
type Watcher interface {
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
}

// FollowNodes watches the Nodes until ctx is done and, on every change of one (cordoned,
// uncordoned, tainted, relabelled, added), enqueues the Pods no Node fitted, as kube-scheduler
// moves its unschedulable Pods back to its active queue on cluster events; and when a Node's
// kubelet starts again (KubeletAnnotation), the Pods it held.
func (p *Pods) FollowNodes(ctx context.Context, w Watcher, enqueue func(cache.Key) bool) {
	cache.Follow(ctx, w, cache.WatchOptions{Resources: []cache.GroupResource{{Resource: "nodes"}}}, func(ev cache.Event) {
		if ev.Type == cache.Deleted {
			p.mu.Lock()
			delete(p.down, ev.Object.Key().Name)
			p.mu.Unlock()
		} else if started := p.noteNode(ev.Object); started != nil {
			for _, k := range started {
				enqueue(k)
			}
		}
		enqueueKeys(p, func(p *Pods) map[cache.Key]struct{} { return p.waiting }, enqueue)
	})
}

// noteNode notes whether the kubelet of the Node obj runs (KubeletAnnotation) and, when it
// starts again, returns the Pods it held.
func (p *Pods) noteNode(obj *cache.Object) []cache.Key {
	name := obj.Key().Name
	state := obj.Annotation(KubeletAnnotation)
	down := state == KubeletStopped || state == KubeletNotReady
	p.mu.Lock()
	defer p.mu.Unlock()
	was := p.down[name]
	if down {
		p.down[name] = true
		return nil
	}
	delete(p.down, name)
	if !was {
		return nil
	}
	var out []cache.Key
	for k, n := range p.held {
		if n == name {
			out = append(out, k)
			delete(p.held, k)
		}
	}
	return out
}

// hold reports whether the kubelet of node is down, and then holds the Pod at key.
func (p *Pods) hold(key cache.Key, node string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.down[node] {
		return false
	}
	p.held[key] = node
	return true
}
