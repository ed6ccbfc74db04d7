package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/endpointslice"
	endpointsliceutil "k8s.io/endpointslice/util"
)

// Client is how the controller reads and writes: the in-process API client (registry.Client).
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Create(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Delete(ctx context.Context, key cache.Key, pre cache.Preconditions) (*cache.Object, bool, error)
}

// Recorder records the reconciler's Events (events.Recorder).
type Recorder interface {
	Record(ctx context.Context, ev events.Event)
}

// The controllers' names, as kube-controller-manager's: the field managers of their writes
// and the managed-by labels' values.
const (
	SliceController     = "endpointslice-controller.k8s.io"
	EndpointsController = "endpoint-controller"
)

// maxEndpointsPerSlice is kube-controller-manager's default --max-endpoints-per-slice.
const maxEndpointsPerSlice = 100

// Resources.
var (
	ServicesResource  = cache.GroupResource{Resource: "services"}
	podsResource      = cache.GroupResource{Resource: "pods"}
	nodesResource     = cache.GroupResource{Resource: "nodes"}
	endpointsResource = cache.GroupResource{Resource: "endpoints"}
	slicesResource    = cache.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}
)

// Config configures the Controller. Slices and Endpoints are the clients whose writes carry
// the two controllers' field managers (SliceController, EndpointsController); both required.
type Config struct {
	Slices, Endpoints Client
	// Events records the reconciler's Events. Nil: dropped.
	Events Recorder
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

// Controller is the Reconciler over Services (for a reconciler.Controller).
type Controller struct {
	cfg    Config
	slices *endpointslice.Reconciler
	times  *endpointsliceutil.TriggerTimeTracker
	log    logr.Logger
	// nodeList is the Nodes read at the start of the latest pass (NodeLister).
	nodeList atomic.Pointer[corelisters.NodeLister]
}

var _ reconciler.Reconciler = (*Controller)(nil)

// New makes the Controller of cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Slices == nil || cfg.Endpoints == nil {
		return nil, errors.New("endpoints: Slices and Endpoints clients are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	c := &Controller{cfg: cfg, times: endpointsliceutil.NewTriggerTimeTracker(), log: logr.FromSlogHandler(cfg.Logger.Handler())}
	c.slices = endpointslice.NewReconciler(clientset{c: cfg.Slices}, c, maxEndpointsPerSlice,
		endpointsliceutil.NewEndpointSliceTracker(), nil, eventRecorder{r: cfg.Events}, SliceController)
	return c, nil
}

// Reconcile brings the EndpointSlices and the Endpoints of the Service at key to its Pods.
func (c *Controller) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	obj, err := c.cfg.Slices.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		c.times.DeleteService(key.Namespace, key.Name)
		// Its EndpointSlices are the collector's (owned); its Endpoints are deleted here.
		return reconciler.Result{}, c.deleteEndpoints(ctx, key)
	}
	if err != nil {
		return reconciler.Result{}, err
	}
	var svc corev1.Service
	if err := json.Unmarshal(obj.Raw(), &svc); err != nil {
		return reconciler.Result{}, reconciler.TerminalError(err)
	}
	if svc.Spec.Selector == nil || svc.Spec.Type == corev1.ServiceTypeExternalName {
		return reconciler.Result{}, nil // the user's to describe
	}
	l, err := c.cfg.Slices.List(ctx, podsResource, cache.InNamespace(svc.Namespace), cache.MatchingLabels(labels.SelectorFromSet(svc.Spec.Selector)))
	if err != nil {
		return reconciler.Result{}, err
	}
	pods := make([]*corev1.Pod, 0, len(l.Items))
	for _, o := range l.Items {
		var p corev1.Pod
		if json.Unmarshal(o.Raw(), &p) == nil {
			pods = append(pods, &p)
		}
	}
	existing, err := c.existingSlices(ctx, &svc)
	if err != nil {
		return reconciler.Result{}, err
	}
	c.readNodes(ctx)
	trigger := c.times.ComputeEndpointLastChangeTriggerTime(svc.Namespace, &svc, pods)
	if err := c.slices.Reconcile(c.log, &svc, pods, existing, trigger); err != nil {
		return reconciler.Result{}, err
	}
	return reconciler.Result{}, c.syncEndpoints(ctx, &svc, pods, trigger)
}

// existingSlices are the EndpointSlices this controller manages for svc.
func (c *Controller) existingSlices(ctx context.Context, svc *corev1.Service) ([]*discoveryv1.EndpointSlice, error) {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name, discoveryv1.LabelManagedBy: SliceController})
	l, err := c.cfg.Slices.List(ctx, slicesResource, cache.InNamespace(svc.Namespace), cache.MatchingLabels(sel))
	if err != nil {
		return nil, err
	}
	out := make([]*discoveryv1.EndpointSlice, 0, len(l.Items))
	for _, o := range l.Items {
		var es discoveryv1.EndpointSlice
		if json.Unmarshal(o.Raw(), &es) == nil {
			out = append(out, &es)
		}
	}
	return out, nil
}

// readNodes reads the Nodes for the pass (the reconciler reads a Pod's Node for its zone; a
// Pod on a Node that does not exist is left out, as kube does).
func (c *Controller) readNodes(ctx context.Context) {
	idx := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{})
	if l, err := c.cfg.Slices.List(ctx, nodesResource); err == nil {
		for _, o := range l.Items {
			var n corev1.Node
			if json.Unmarshal(o.Raw(), &n) == nil {
				_ = idx.Add(&n)
			}
		}
	}
	nl := corelisters.NewNodeLister(idx)
	c.nodeList.Store(&nl)
}

func (c *Controller) nodes() corelisters.NodeLister {
	if nl := c.nodeList.Load(); nl != nil {
		return *nl
	}
	return corelisters.NewNodeLister(toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{}))
}

// The NodeLister the reconciler is given: the Nodes read at the latest pass.
var _ corelisters.NodeLister = (*Controller)(nil)

// List lists the Nodes matching sel.
func (c *Controller) List(sel labels.Selector) ([]*corev1.Node, error) { return c.nodes().List(sel) }

// Get is the Node name.
func (c *Controller) Get(name string) (*corev1.Node, error) { return c.nodes().Get(name) }

// Watcher is how FollowPods watches: the store, or the in-process client.
type Watcher interface {
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
}

// FollowPods watches the Pods until ctx is done and, on every change of one, enqueues the
// Services of its namespace that have a selector (a Pod that stopped matching one must leave
// its endpoints too).
func (c *Controller) FollowPods(ctx context.Context, w Watcher, enqueue func(cache.Key) bool) {
	cache.Follow(ctx, w, cache.WatchOptions{Resources: []cache.GroupResource{podsResource}}, func(ev cache.Event) {
		if ev.Object == nil {
			return
		}
		l, err := c.cfg.Slices.List(ctx, ServicesResource, cache.InNamespace(ev.Object.Key().Namespace))
		if err != nil {
			return
		}
		for _, o := range l.Items {
			var svc corev1.Service
			if json.Unmarshal(o.Raw(), &svc) == nil && svc.Spec.Selector != nil {
				enqueue(o.Key())
			}
		}
	})
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

// toMap turns a typed object into the decoded JSON the client writes.
func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return cache.DecodeJSON(raw)
}

// formatTrigger is the last-change-trigger-time annotation's value.
func formatTrigger(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }
