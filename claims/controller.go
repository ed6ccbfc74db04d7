package claims

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/opemu/opemu/registry"
	"slices"
	"sync"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/reconciler"
	corev1 "k8s.io/api/core/v1"
)

// Client is how the controller reads and writes: the in-process API client (registry.Client),
// so its writes pass the write path's rules like a client's.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
}

// Name is the controller's name in metrics and logs, and its field manager: kube's.
const Name = "pvc-protection-controller"

// The resources the controller reads.
var (
	claims = cache.GroupResource{Resource: "persistentvolumeclaims"}
	pods   = cache.GroupResource{Resource: "pods"}
)

// Config configures a Controller. Client is required; zero values are documented defaults.
type Config struct {
	Client Client
	// Tuning is the queue's (workers, backoff, metrics, log, clock).
	Tuning reconciler.Tuning
}

// Controller removes the protection finalizer of deleted claims no pod uses. Create it with
// New; Run it while leading.
type Controller struct {
	cfg  Config
	ctrl *reconciler.Controller
}

// New makes a Controller over cfg.
func New(cfg Config) (*Controller, error) {
	if cfg.Client == nil {
		return nil, errors.New("claims: Client is required")
	}
	c := &Controller{cfg: cfg}
	ctrl, err := reconciler.New(reconciler.Config{Store: cfg.Client, Resource: claims, Reconciler: c, Name: Name, Tuning: cfg.Tuning})
	if err != nil {
		return nil, err
	}
	c.ctrl = ctrl
	return c, nil
}

// Run works until ctx is done, starting from a full list of claims, and returns once its
// workers and its watch of pods have. It may be called again after it returns.
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { c.watchPods(ctx) })
	err := c.ctrl.Run(ctx)
	cancel()
	wg.Wait()
	return err
}

// watchPods enqueues the claims a pod names when the pod goes or changes (it may have
// finished), until ctx is done; a watch that ends is opened again.
func (c *Controller) watchPods(ctx context.Context) {
	cache.Follow(ctx, c.cfg.Client, cache.WatchOptions{Resources: []cache.GroupResource{pods}}, func(ev cache.Event) {
		if ev.Type == cache.Added || ev.Object == nil {
			return // a new pod holds claims; it frees none
		}
		if raw := ev.Object.Raw(); !bytes.Contains(raw, persistentVolumeClaimField) && !bytes.Contains(raw, ephemeralField) {
			return // no volume names a claim (claimNames): no decode
		}
		pod, err := decodePod(ev.Object)
		if err != nil {
			return
		}
		for _, name := range claimNames(pod) {
			c.ctrl.Enqueue(cache.Key{Resource: claims.Resource, Namespace: pod.Namespace, Name: name})
		}
	})
}

// Reconcile looks at the claim at key (reconciler.Reconciler): being deleted, with the
// finalizer, and used by no pod that has not finished, it loses the finalizer.
func (c *Controller) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	obj, err := c.cfg.Client.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return reconciler.Result{}, nil
	}
	if err != nil {
		return reconciler.Result{}, err
	}
	if !obj.Deleting() || !slices.Contains(obj.Finalizers(), kinds.PVCProtectionFinalizer) {
		return reconciler.Result{}, nil
	}
	used, err := c.inUse(ctx, key)
	if err != nil || used {
		return reconciler.Result{}, err // in use: the pod's going enqueues the claim again
	}
	return reconciler.Result{}, c.release(ctx, obj)
}

// inUse reports whether a pod of the claim's namespace that has not finished names it.
func (c *Controller) inUse(ctx context.Context, key cache.Key) (bool, error) {
	l, err := c.cfg.Client.List(ctx, pods, cache.InNamespace(key.Namespace))
	if err != nil {
		return false, err
	}
	for _, o := range l.Items {
		pod, err := decodePod(o)
		if err != nil {
			continue
		}
		if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		if slices.Contains(claimNames(pod), key.Name) {
			return true, nil
		}
	}
	return false, nil
}

// release removes the finalizer from obj, as it was read (its uid and resourceVersion: a claim
// changed meanwhile is looked at again).
func (c *Controller) release(ctx context.Context, obj *cache.Object) error {
	m, err := registry.WithoutFinalizer(obj, kinds.PVCProtectionFinalizer)
	if err != nil {
		return err
	}
	_, err = c.cfg.Client.Update(ctx, obj.Key(), m)
	if errors.Is(err, cache.ErrNotFound) {
		return nil
	}
	return err
}

// podRef is the part of a pod the controller reads.
type podRef struct {
	Namespace string
	Name      string
	Spec      corev1.PodSpec
	Status    corev1.PodStatus
}

func decodePod(o *cache.Object) (*podRef, error) {
	var pod corev1.Pod
	if err := json.Unmarshal(o.Raw(), &pod); err != nil {
		return nil, err
	}
	return &podRef{Namespace: o.Key().Namespace, Name: o.Key().Name, Spec: pod.Spec, Status: pod.Status}, nil
}

// The JSON fields of a Pod's volumes that name a claim (claimNames), as stored.
var (
	persistentVolumeClaimField = []byte(`"persistentVolumeClaim":`)
	ephemeralField             = []byte(`"ephemeral":`)
)

// claimNames are the claims a pod uses: its persistentVolumeClaim volumes' and the claims its
// ephemeral volumes make (<pod>-<volume>).
func claimNames(pod *podRef) []string {
	var names []string
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			names = append(names, v.PersistentVolumeClaim.ClaimName)
		case v.Ephemeral != nil:
			names = append(names, pod.Name+"-"+v.Name)
		}
	}
	return names
}
