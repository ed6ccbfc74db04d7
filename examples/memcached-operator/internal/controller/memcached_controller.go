// Package controller is the Memcached operator's reconciler: the kubebuilder book's pattern
// (Getting Started) written with controller-runtime. Each Memcached owns a Deployment sized
// from spec.size; its status carries the Available, Progressing and Degraded conditions; a
// finalizer lets it record an Event before it goes; the Deployment is collected with it
// through its ownerReference.
package controller

import (
	"cmp"
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	cachev1alpha1 "github.com/opemu/opemu/examples/memcached-operator/api/v1alpha1"
)

// The conditions of a Memcached's status.
const (
	// TypeAvailable is True once the Deployment has the size asked for.
	TypeAvailable = "Available"
	// TypeProgressing is True while the Deployment is being created or resized.
	TypeProgressing = "Progressing"
	// TypeDegraded is set while the Memcached is finalized (being deleted).
	TypeDegraded = "Degraded"
)

// Finalizer keeps a Memcached being deleted until the operator has done its cleanup.
const Finalizer = "cache.example.com/finalizer"

// Image is what the Deployment runs.
const Image = "memcached:1.6.38-alpine"

// MemcachedReconciler reconciles Memcached objects.
type MemcachedReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// Recorder records Events (the manager's, events.k8s.io/v1).
	Recorder events.EventRecorder
}

// The RBAC the operator needs, as controller-gen reads it.
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=cache.example.com,resources=memcacheds/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;update;patch;delete

// Reconcile moves the cluster towards the Memcached named by req: the finalizer first, then
// the cleanup if it is being deleted, else the Deployment and the status conditions.
func (r *MemcachedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := logf.FromContext(ctx)
	m := &cachev1alpha1.Memcached{}
	if err := r.Get(ctx, req.NamespacedName, m); err != nil {
		// Gone: its Deployment goes with it (garbage collection by ownerReference).
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	if len(m.Status.Conditions) == 0 {
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: TypeAvailable, Status: metav1.ConditionUnknown, Reason: "Reconciling", Message: "Starting reconciliation"})
		if err := r.Status().Update(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
		// Read it again: the status update moved its resourceVersion.
		if err := r.Get(ctx, req.NamespacedName, m); err != nil {
			return ctrl.Result{}, err
		}
	}

	if !controllerutil.ContainsFinalizer(m, Finalizer) && m.DeletionTimestamp.IsZero() {
		controllerutil.AddFinalizer(m, Finalizer)
		if err := r.Update(ctx, m); err != nil {
			return ctrl.Result{}, err
		}
	}

	if !m.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, m)
	}

	dep := &appsv1.Deployment{}
	err := r.Get(ctx, req.NamespacedName, dep)
	if apierrors.IsNotFound(err) {
		dep, err = r.deploymentFor(m)
		if err != nil {
			return ctrl.Result{}, r.failed(ctx, m, fmt.Errorf("defining the Deployment: %w", err))
		}
		log.Info("creating the Deployment", "deployment", dep.Name)
		if err := r.Create(ctx, dep); err != nil {
			return ctrl.Result{}, r.failed(ctx, m, fmt.Errorf("creating the Deployment: %w", err))
		}
		r.Recorder.Eventf(m, dep, corev1.EventTypeNormal, "Created", "CreateDeployment", "Deployment %s created with %d replicas", dep.Name, *dep.Spec.Replicas)
		return ctrl.Result{}, r.setConditions(ctx, m,
			metav1.Condition{Type: TypeProgressing, Status: metav1.ConditionTrue, Reason: "Creating", Message: fmt.Sprintf("Deployment %s created", dep.Name)})
	}
	if err != nil {
		return ctrl.Result{}, err
	}

	size := ptr.Deref(m.Spec.Size, cachev1alpha1.DefaultSize)
	if dep.Spec.Replicas == nil || *dep.Spec.Replicas != size {
		dep.Spec.Replicas = ptr.To(size)
		if err := r.Update(ctx, dep); err != nil {
			// A conflict is retried with the newer Deployment.
			return ctrl.Result{}, r.failed(ctx, m, fmt.Errorf("resizing the Deployment: %w", err))
		}
		r.Recorder.Eventf(m, dep, corev1.EventTypeNormal, "Scaled", "ScaleDeployment", "Deployment %s scaled to %d replicas", dep.Name, size)
		return ctrl.Result{}, r.setConditions(ctx, m,
			metav1.Condition{Type: TypeProgressing, Status: metav1.ConditionTrue, Reason: "Scaling", Message: fmt.Sprintf("Deployment %s scaled to %d", dep.Name, size)})
	}

	return ctrl.Result{}, r.setConditions(ctx, m,
		metav1.Condition{Type: TypeAvailable, Status: metav1.ConditionTrue, Reason: "Reconciled", Message: fmt.Sprintf("Deployment %s has %d replicas", dep.Name, size)},
		metav1.Condition{Type: TypeProgressing, Status: metav1.ConditionFalse, Reason: "Reconciled", Message: "The Deployment has the size asked for"})
}

// finalize is the cleanup of a Memcached being deleted: an Event says so, the Degraded
// condition records it, and the finalizer is removed so the deletion completes.
func (r *MemcachedReconciler) finalize(ctx context.Context, m *cachev1alpha1.Memcached) error {
	if !controllerutil.ContainsFinalizer(m, Finalizer) {
		return nil
	}
	if err := r.setConditions(ctx, m, metav1.Condition{Type: TypeDegraded, Status: metav1.ConditionUnknown, Reason: "Finalizing", Message: "Performing the finalizer's operations"}); err != nil {
		return err
	}
	// The cleanup an operator owes what it made outside the cluster goes here. The
	// Deployment needs none: it is collected with its owner.
	r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, "Deleting", "Finalize", "Custom resource %s is being deleted from the namespace %s", m.Name, m.Namespace)
	if err := r.setConditions(ctx, m, metav1.Condition{Type: TypeDegraded, Status: metav1.ConditionTrue, Reason: "Finalizing", Message: "The finalizer's operations are done"}); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(m, Finalizer)
	return r.Update(ctx, m)
}

// failed records err in the Available condition and returns it (so the key is retried).
func (r *MemcachedReconciler) failed(ctx context.Context, m *cachev1alpha1.Memcached, err error) error {
	if apierrors.IsConflict(err) {
		return err
	}
	_ = r.setConditions(ctx, m, metav1.Condition{Type: TypeAvailable, Status: metav1.ConditionFalse, Reason: "Reconciling", Message: err.Error()})
	return err
}

// setConditions writes conds into m's status when they change it (each condition's
// observedGeneration is m's generation).
func (r *MemcachedReconciler) setConditions(ctx context.Context, m *cachev1alpha1.Memcached, conds ...metav1.Condition) error {
	changed := false
	for _, c := range conds {
		c.ObservedGeneration = m.Generation
		changed = meta.SetStatusCondition(&m.Status.Conditions, c) || changed
	}
	if !changed {
		return nil
	}
	return r.Status().Update(ctx, m)
}

// deploymentFor is the Deployment of m: spec.size replicas of memcached on spec.containerPort,
// as a non-root user, owned by m (a controller reference, which also blocks m's foreground
// deletion until it is gone).
func (r *MemcachedReconciler) deploymentFor(m *cachev1alpha1.Memcached) (*appsv1.Deployment, error) {
	labels := map[string]string{
		"app.kubernetes.io/name":       "memcached-operator",
		"app.kubernetes.io/instance":   m.Name,
		"app.kubernetes.io/managed-by": "memcached-operator",
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(ptr.Deref(m.Spec.Size, cachev1alpha1.DefaultSize)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					Containers: []corev1.Container{{
						Name:            "memcached",
						Image:           Image,
						ImagePullPolicy: corev1.PullIfNotPresent,
						Command:         []string{"memcached", "--memory-limit=64", "-o", "modern", "-v"},
						Ports:           []corev1.ContainerPort{{Name: "memcached", ContainerPort: cmp.Or(m.Spec.ContainerPort, cachev1alpha1.DefaultContainerPort)}},
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot:             ptr.To(true),
							RunAsUser:                ptr.To(int64(1001)),
							AllowPrivilegeEscalation: ptr.To(false),
							Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
						},
					}},
				},
			},
		},
	}
	if err := ctrl.SetControllerReference(m, dep, r.Scheme); err != nil {
		return nil, err
	}
	return dep, nil
}

// SetupWithManager runs the reconciler in mgr: on changes of Memcacheds and of the
// Deployments they own.
func (r *MemcachedReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&cachev1alpha1.Memcached{}).
		Owns(&appsv1.Deployment{}).
		Named("memcached").
		Complete(r)
}
