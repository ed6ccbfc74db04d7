package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// An operator written the way the kubebuilder book writes one, run by a controller-runtime
// manager against opemu: per Application it owns a ConfigMap and a Deployment
// (SetControllerReference, CreateOrUpdate) and records an Event per reconcile with the
// manager's recorder (events.k8s.io/v1, protobuf, series patched). opemu's built-in controllers
// run too: the Application controller, the Deployment's simulated rollout and the garbage
// collector that deletes the children with the Application.

var applicationGVK = schema.GroupVersionKind{Group: "cloudnative.elide.dev", Version: "v1", Kind: "Application"}

// pass is what one reconcile did.
type pass struct {
	poke           string // the Application's poke annotation when it was read
	config, deploy controllerutil.OperationResult
}

type appOperator struct {
	client client.Client
	// reader reads the Application live, not from the manager's cache: each kind has its own
	// informer, so a child's event (the garbage collector orphaning or deleting it) can arrive
	// before the Application's cache holds the deletion that caused it, and a pass that read
	// the cached Application would put the child back under an owner being deleted. This race
	// is kube's too; careful operators read the owner live.
	reader   client.Reader
	scheme   *runtime.Scheme
	recorder recorder.EventRecorder
	passes   chan pass
}

func (r *appOperator) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(applicationGVK)
	if err := r.reader.Get(ctx, req.NamespacedName, app); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !app.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil // being deleted: the garbage collector takes the children
	}
	image, _, _ := unstructured.NestedString(app.Object, "spec", "image")
	replicas, _, _ := unstructured.NestedInt64(app.Object, "spec", "replicas")
	labels := map[string]string{"app": req.Name}

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: req.Name + "-config", Namespace: req.Namespace}}
	opCM, err := controllerutil.CreateOrUpdate(ctx, r.client, cm, func() error {
		cm.Data = map[string]string{"image": image}
		return controllerutil.SetControllerReference(app, cm, r.scheme)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace}}
	opDep, err := controllerutil.CreateOrUpdate(ctx, r.client, dep, func() error {
		dep.Spec.Replicas = ptr.To(int32(replicas))
		if dep.Spec.Selector == nil {
			dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		}
		dep.Spec.Template.Labels = labels
		if len(dep.Spec.Template.Spec.Containers) == 0 {
			dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app"}}
		}
		c := &dep.Spec.Template.Spec.Containers[0]
		c.Image = image
		c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
		c.Env = []corev1.EnvVar{{Name: "CONFIG", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}, Key: "image"}}}}
		return controllerutil.SetControllerReference(app, dep, r.scheme)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	// The Service's spec is rebuilt on every pass, without the cluster IP the server allocated:
	// the server keeps it (as kube-apiserver does), so the update stores nothing new.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: req.Name, Namespace: req.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, r.client, svc, func() error {
		svc.Spec = corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}
		return controllerutil.SetControllerReference(app, svc, r.scheme)
	}); err != nil {
		return ctrl.Result{}, err
	}
	r.recorder.Eventf(app, nil, corev1.EventTypeNormal, "Synced", "Reconcile", "ConfigMap and Deployment are in sync")
	select { // the test reads passes only while it waits for one; it never blocks the operator
	case r.passes <- pass{poke: app.GetAnnotations()["poke"], config: opCM, deploy: opDep}:
	default:
	}
	return ctrl.Result{}, nil
}

func TestControllerRuntimeOperator(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=100ms")
	crlog.SetLogger(logr.Discard())
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	cfg := p.restConfig()
	ct := &contentTypes{seen: map[string]string{}}
	cfg.WrapTransport = ct.wrap
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Controller: crconfig.Controller{SkipNameValidation: ptr.To(true)},
	})
	require.NoError(t, err)
	op := &appOperator{client: mgr.GetClient(), reader: mgr.GetAPIReader(), scheme: scheme, recorder: mgr.GetEventRecorder("app-operator"), passes: make(chan pass, 100)}
	app := &unstructured.Unstructured{}
	app.SetGroupVersionKind(applicationGVK)
	require.NoError(t, ctrl.NewControllerManagedBy(mgr).For(app).Owns(&appsv1.Deployment{}).Owns(&corev1.ConfigMap{}).Complete(op))
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { assert.NoError(t, mgr.Start(ctx)) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	c := mgr.GetClient()
	demo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cloudnative.elide.dev/v1", "kind": "Application",
		"metadata": map[string]any{"name": "demo", "namespace": "default"},
		"spec":     map[string]any{"replicas": int64(2), "image": "nginx:1.27"},
	}}
	require.NoError(t, c.Create(context.Background(), demo))

	// next waits for the next reconcile that read the Application with poke.
	next := func(poke string) pass {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case p := <-op.passes:
				if p.poke == poke {
					return p
				}
			case <-deadline:
				t.Fatalf("no reconcile saw poke %q", poke)
			}
		}
	}
	// pokeApp sets the Application's poke annotation.
	pokeApp := func(a *unstructured.Unstructured, poke string) {
		t.Helper()
		require.Eventually(t, func() bool {
			err := c.Get(context.Background(), client.ObjectKeyFromObject(a), a)
			if err != nil {
				return false
			}
			a.SetAnnotations(map[string]string{"poke": poke})
			err = c.Update(context.Background(), a)
			return err == nil || !apierrors.IsConflict(err)
		}, 10*time.Second, 10*time.Millisecond)
	}
	first := next("")
	assert.Equal(t, controllerutil.OperationResultCreated, first.config)
	assert.Equal(t, controllerutil.OperationResultCreated, first.deploy)

	// The Deployment rolls out: each of its status writes brings the owner back (Owns), and
	// those passes change nothing; it ends available, and the Application Running.
	// rolledOut says whether the Application's Deployment has rolled out, its last status write
	// made, and the Application is Running.
	rolledOut := func(a *unstructured.Unstructured, replicas int32) func() bool {
		return func() bool {
			var dep appsv1.Deployment
			if c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: a.GetName()}, &dep) != nil {
				return false
			}
			err := c.Get(context.Background(), client.ObjectKeyFromObject(a), a)
			phase, _, _ := unstructured.NestedString(a.Object, "status", "phase")
			return err == nil && phase == "Running" && dep.Status.AvailableReplicas == replicas && dep.Status.UpdatedReplicas == replicas &&
				len(dep.Status.Conditions) == 2 && dep.Status.Conditions[1].Reason == "NewReplicaSetAvailable"
		}
	}
	require.Eventually(t, rolledOut(demo, 2), 20*time.Second, 20*time.Millisecond, "the Deployment rolls out")
	// The pass that reads this poke comes after every pass the rollout brought (the status
	// writes' events may still be on their way when the test sees the last one).
	pokeApp(demo, "rolled-out")
	during := 0
	for deadline, rolled := time.After(20*time.Second), false; !rolled; {
		select {
		case p := <-op.passes:
			if rolled = p.poke == "rolled-out"; !rolled {
				during++
				assert.Equal(t, controllerutil.OperationResultNone, p.config, "a pass during the rollout")
				assert.Equal(t, controllerutil.OperationResultNone, p.deploy, "a pass during the rollout")
			}
		case <-deadline:
			t.Fatal("no reconcile saw poke rolled-out")
		}
	}
	assert.Positive(t, during, "the rollout's status writes brought the owner back")

	// The children's creation brings the owner back; those passes change nothing. Poke the
	// Application and check that every later pass changes nothing either: the server's
	// defaults match what the operator compares, so no write happens and no watch event
	// brings it back (a never-ending update loop would move the children's versions).
	rvs := func() []string {
		var cm corev1.ConfigMap
		var dep appsv1.Deployment
		var svc corev1.Service
		require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "demo-config"}, &cm))
		require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "demo"}, &dep))
		require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "demo"}, &svc))
		require.NotEmpty(t, svc.Spec.ClusterIP)
		return []string{cm.ResourceVersion, dep.ResourceVersion, svc.ResourceVersion}
	}
	for _, poke := range []string{"1", "2", "3"} {
		pokeApp(demo, poke)
		before := rvs()
		got := next(poke)
		assert.Equal(t, controllerutil.OperationResultNone, got.config, "poke %s", poke)
		assert.Equal(t, controllerutil.OperationResultNone, got.deploy, "poke %s", poke)
		assert.Equal(t, before, rvs(), "a child (ConfigMap, Deployment, Service) was changed by a pass")
	}

	// The Deployment and the Service are owned, carry the server's defaults, and the Events are listed by
	// kubectl: the repeated Synced Event as one series.
	var dep appsv1.Deployment
	require.NoError(t, c.Get(context.Background(), client.ObjectKey{Namespace: "default", Name: "demo"}, &dep))
	require.Len(t, dep.OwnerReferences, 1)
	assert.Equal(t, "Application", dep.OwnerReferences[0].Kind)
	assert.Equal(t, ptr.To(true), dep.OwnerReferences[0].Controller)
	assert.Equal(t, ptr.To[int32](600), dep.Spec.ProgressDeadlineSeconds)
	k := p.kubectl(t)
	require.Eventually(t, func() bool {
		out := k.Run("events", "--for", "application.cloudnative.elide.dev/demo")
		// The series is the operator's own line (opemu's Application controller records
		// repeated Events about demo too).
		for _, line := range strings.Split(out, "\n") {
			if strings.Contains(line, "Synced") && strings.Contains(line, "ConfigMap and Deployment are in sync") && strings.Contains(line, "(x") {
				return true
			}
		}
		return false
	}, 20*time.Second, 100*time.Millisecond, "kubectl events:\n%s", k.Run("events"))
	assert.Contains(t, k.Run("describe", "application", "demo"), "Synced")
	// The recorder wrote through events.k8s.io/v1: protobuf creates, a strategic-merge patch of
	// the series.
	create, ok := ct.find("POST /apis/events.k8s.io/v1/namespaces/default/events")
	assert.True(t, ok, "the recorder created its Events through events.k8s.io/v1")
	assert.Equal(t, "application/vnd.kubernetes.protobuf", create)
	patch, ok := ct.find("PATCH /apis/events.k8s.io/v1/namespaces/default/events/demo.")
	assert.True(t, ok, "the recorder patched the series")
	assert.Equal(t, "application/strategic-merge-patch+json", patch)
	_, ok = ct.find("POST /api/v1/namespaces/default/events")
	assert.False(t, ok, "nothing was recorded through v1")

	// Deleting the Application deletes what it owns, with each propagation policy; orphan keeps
	// the children, without their owner.
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground, metav1.DeletePropagationOrphan} {
		t.Run(string(policy), func(t *testing.T) {
			name := "del-" + strings.ToLower(string(policy))
			a := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "cloudnative.elide.dev/v1", "kind": "Application",
				"metadata": map[string]any{"name": name, "namespace": "default"},
				"spec":     map[string]any{"replicas": int64(1), "image": "nginx:1.27"},
			}}
			require.NoError(t, c.Create(context.Background(), a))
			children := []client.Object{
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name + "-config"}},
				&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}},
				&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}},
			}
			// left returns the children still stored, and whether each still names an owner. It
			// reads them live: the manager's cache may not hold the garbage collector's last write.
			left := func() map[string]bool {
				out := map[string]bool{}
				for _, ch := range children {
					if err := op.reader.Get(context.Background(), client.ObjectKeyFromObject(ch), ch); err == nil {
						out[fmt.Sprintf("%T %s", ch, ch.GetName())] = len(ch.GetOwnerReferences()) > 0
					} else {
						require.True(t, apierrors.IsNotFound(err), "%v", err)
					}
				}
				return out
			}
			require.Eventually(t, func() bool { return len(left()) == 3 }, 20*time.Second, 20*time.Millisecond, "the operator made the children")
			// Delete once the operator is idle: a pass that read the Application before the
			// delete and wrote after the garbage collector would put a child back under its
			// owner (on a cluster too). The rollout's last status write is made, and the pass
			// that read the poke ran after every earlier pass of this key (the workqueue never
			// runs one key twice at once); nothing then brings the Application back but the delete.
			require.Eventually(t, rolledOut(a, 1), 20*time.Second, 20*time.Millisecond, "the Deployment rolls out")
			pokeApp(a, "idle-"+name)
			next("idle-" + name)
			require.NoError(t, c.Delete(context.Background(), a, client.PropagationPolicy(policy)))
			gone := func() bool {
				return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(a), a))
			}
			switch policy {
			case metav1.DeletePropagationForeground:
				require.Eventually(t, gone, 20*time.Second, 5*time.Millisecond)
				assert.Empty(t, left(), "the Application went after its children (blockOwnerDeletion)")
			case metav1.DeletePropagationBackground:
				require.Eventually(t, gone, 20*time.Second, 5*time.Millisecond)
				require.Eventually(t, func() bool { return len(left()) == 0 }, 20*time.Second, 20*time.Millisecond)
			case metav1.DeletePropagationOrphan:
				require.Eventually(t, gone, 20*time.Second, 5*time.Millisecond)
				kept := left()
				assert.Len(t, kept, 3, "orphaned children stay")
				for child, owned := range kept {
					assert.False(t, owned, "%s names no owner any more", child)
				}
			}
		})
	}
}
