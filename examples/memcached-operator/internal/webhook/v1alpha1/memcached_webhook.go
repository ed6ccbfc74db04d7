// Package v1alpha1 holds the Memcached operator's admission webhooks, as kubebuilder scaffolds
// them (`kubebuilder create webhook --group cache --version v1alpha1 --kind Memcached
// --defaulting --programmatic-validation`): a defaulter that fills in spec.size and
// spec.containerPort, and a validator for what the CRD's schema cannot say.
package v1alpha1

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	cachev1alpha1 "github.com/opemu/opemu/examples/memcached-operator/api/v1alpha1"
)

// MinContainerPort is the lowest port Memcached may listen on: it runs as a non-root user.
const MinContainerPort = 1024

// SetupMemcachedWebhookWithManager serves both webhooks from mgr's webhook server, at the
// paths controller-runtime derives from the kind (those of config/webhook/manifests.yaml).
func SetupMemcachedWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &cachev1alpha1.Memcached{}).
		WithDefaulter(&MemcachedCustomDefaulter{}).
		WithValidator(&MemcachedCustomValidator{}).
		Complete()
}

// +kubebuilder:webhook:path=/mutate-cache-example-com-v1alpha1-memcached,mutating=true,failurePolicy=fail,sideEffects=None,groups=cache.example.com,resources=memcacheds,verbs=create;update,versions=v1alpha1,name=mmemcached-v1alpha1.kb.io,admissionReviewVersions=v1

// MemcachedCustomDefaulter sets the defaults of a Memcached on create and update.
type MemcachedCustomDefaulter struct{}

var _ admission.Defaulter[*cachev1alpha1.Memcached] = &MemcachedCustomDefaulter{}

// Default sets spec.size to 1 and spec.containerPort to 11211 when they are left out.
func (d *MemcachedCustomDefaulter) Default(ctx context.Context, m *cachev1alpha1.Memcached) error {
	logf.FromContext(ctx).V(1).Info("defaulting", "name", m.GetName())
	if m.Spec.Size == nil {
		m.Spec.Size = ptr.To(cachev1alpha1.DefaultSize)
	}
	if m.Spec.ContainerPort == 0 {
		m.Spec.ContainerPort = cachev1alpha1.DefaultContainerPort
	}
	return nil
}

// +kubebuilder:webhook:path=/validate-cache-example-com-v1alpha1-memcached,mutating=false,failurePolicy=fail,sideEffects=None,groups=cache.example.com,resources=memcacheds,verbs=create;update,versions=v1alpha1,name=vmemcached-v1alpha1.kb.io,admissionReviewVersions=v1

// MemcachedCustomValidator checks a Memcached on create and update.
type MemcachedCustomValidator struct{}

var _ admission.Validator[*cachev1alpha1.Memcached] = &MemcachedCustomValidator{}

// ValidateCreate refuses a privileged container port (422, with a cause on
// spec.containerPort), and warns that a Memcached of the largest size cannot grow.
func (v *MemcachedCustomValidator) ValidateCreate(_ context.Context, m *cachev1alpha1.Memcached) (admission.Warnings, error) {
	return warnings(m), invalid(m, validatePort(m))
}

// ValidateUpdate refuses what ValidateCreate does, and a change of spec.containerPort (the
// port clients were given).
func (v *MemcachedCustomValidator) ValidateUpdate(_ context.Context, old, m *cachev1alpha1.Memcached) (admission.Warnings, error) {
	errs := validatePort(m)
	if old.Spec.ContainerPort != 0 && m.Spec.ContainerPort != old.Spec.ContainerPort {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "containerPort"), fmt.Sprintf("is immutable once set (it is %d)", old.Spec.ContainerPort)))
	}
	return warnings(m), invalid(m, errs)
}

// ValidateDelete allows every deletion (the webhook is not registered for DELETE).
func (v *MemcachedCustomValidator) ValidateDelete(context.Context, *cachev1alpha1.Memcached) (admission.Warnings, error) {
	return nil, nil
}

func validatePort(m *cachev1alpha1.Memcached) field.ErrorList {
	p := m.Spec.ContainerPort
	if p != 0 && (p < MinContainerPort || p > 65535) {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "containerPort"), p, fmt.Sprintf("must be between %d and 65535: memcached runs as a non-root user", MinContainerPort))}
	}
	return nil
}

// warnings are the Warning headers the client gets (kubectl prints them).
func warnings(m *cachev1alpha1.Memcached) admission.Warnings {
	if m.Spec.Size != nil && *m.Spec.Size == 3 {
		return admission.Warnings{"spec.size is 3, the most this operator runs: the cache cannot grow further"}
	}
	return nil
}

// invalid is errs as the 422 Invalid a cluster answers, or nil.
func invalid(m *cachev1alpha1.Memcached, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(cachev1alpha1.GroupVersion.WithKind("Memcached").GroupKind(), m.Name, errs)
}
