package registry

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/opemu/opemu/webhooks"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Admission, in SPEC §6's order: pruning and schema defaulting, mutating admission, metadata
// and schema validation (422, one cause per field), validating admission (403 on denial).

// admitRequest is one object on its way through admission.
type admitRequest struct {
	t   Target
	op  webhooks.Operation
	obj map[string]any
	old map[string]any // nil on create
	o   Options
	// stamp runs after mutating admission and before validation: the server-owned metadata
	// (and a generated name) are set there, as kube-apiserver's BeforeCreate does.
	stamp func() error
}

// admit runs admission on r.obj, which it modifies in place, and returns the warnings.
func (s *Store) admit(ctx context.Context, r admitRequest) ([]string, error) {
	warnings, err := pruneAndDefault(r.t, r.obj, r.o)
	if err != nil {
		return nil, err
	}
	var req *webhooks.Request
	if s.cfg.Admission != nil {
		req = &webhooks.Request{
			Kind:        metav1.GroupVersionKind{Group: r.t.Kind.Group, Version: r.t.Kind.Version, Kind: r.t.Kind.Kind},
			Resource:    metav1.GroupVersionResource{Group: r.t.Kind.Group, Version: r.t.Kind.Version, Resource: r.t.Kind.Plural},
			SubResource: r.t.Sub,
			Name:        stringOf(metadataOf(r.obj)["name"]),
			Namespace:   r.t.Key.Namespace,
			Operation:   r.op,
			Object:      r.obj,
			OldObject:   r.old,
			DryRun:      r.o.DryRun,
		}
		mres, err := s.cfg.Admission.Mutate(ctx, req)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, mres.Warnings...)
		if !mres.Allowed {
			return nil, admissionDenied(r.t, req.Name, mres)
		}
	}
	if r.stamp != nil {
		if err := r.stamp(); err != nil {
			return nil, err
		}
	}
	if err := validate(r.t, r.obj); err != nil {
		return nil, err
	}
	if req != nil {
		req.Name = stringOf(metadataOf(r.obj)["name"])
		vres := s.cfg.Admission.Validate(ctx, req)
		warnings = append(warnings, vres.Warnings...)
		if !vres.Allowed {
			return nil, admissionDenied(r.t, req.Name, vres)
		}
	}
	return warnings, nil
}

// admitStatus is the path of a /status write: pruning, defaulting and schema validation only.
func admitStatus(t Target, obj map[string]any, o Options) ([]string, error) {
	warnings, err := pruneAndDefault(t, obj, o)
	if err != nil {
		return nil, err
	}
	return warnings, validate(t, obj)
}

// pruneAndDefault drops unknown fields as fieldValidation says and applies schema defaults.
func pruneAndDefault(t Target, obj map[string]any, o Options) ([]string, error) {
	if t.Kind.Schema == nil {
		return nil, nil
	}
	warnings, err := pruneUnknown(t, obj, o)
	if err != nil {
		return nil, err
	}
	t.Kind.Schema.Default(obj)
	return warnings, nil
}

// pruneUnknown drops the fields t's schema does not know: silently (Ignore), with a warning
// each (Warn, the default), or refuses them (Strict, 400).
func pruneUnknown(t Target, obj map[string]any, o Options) ([]string, error) {
	if t.Kind.Schema == nil {
		return nil, nil
	}
	unknown := t.Kind.Schema.Prune(obj)
	var warnings []string
	if len(unknown) > 0 {
		switch o.FieldValidation {
		case "Strict":
			quoted := make([]string, len(unknown))
			for i, f := range unknown {
				quoted[i] = fmt.Sprintf("unknown field %q", f)
			}
			return nil, badRequest("strict decoding error: %s", strings.Join(quoted, ", "))
		case "Ignore":
		default:
			for _, f := range unknown {
				warnings = append(warnings, fmt.Sprintf("unknown field %q", f))
			}
		}
	}
	return warnings, nil
}

// validate checks metadata as Kubernetes' ObjectMeta rules say and the object against the
// kind's schema; every failure is one cause of a 422.
//
// Null label and annotation values are written as "", as decoding into ObjectMeta does in
// Kubernetes, so nothing stored holds a null where clients expect a string.
func validate(t Target, obj map[string]any) error {
	md := metadataOf(obj)
	for _, f := range []string{"labels", "annotations"} {
		if m, ok := md[f].(map[string]any); ok {
			for k, v := range m {
				if v == nil {
					m[k] = ""
				}
			}
		}
	}
	meta, err := objectMetaOf(md)
	if err != nil {
		return badRequest("metadata: %v", err)
	}
	errs := apivalidation.ValidateObjectMeta(&meta, t.Kind.Namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if t.Kind.Schema != nil {
		errs = append(errs, t.Kind.Schema.Validate(obj)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(t.groupKind(), meta.Name, errs)
	}
	return nil
}

// admissionDenied is the 403 a denial answers, with the policy's own message.
func admissionDenied(t Target, name string, res webhooks.Response) error {
	msg := "admission denied the request"
	if res.Result != nil && res.Result.Message != "" {
		msg = res.Result.Message
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: msg,
		Details: &metav1.StatusDetails{Name: name, Group: t.Kind.Group, Kind: t.Kind.Plural},
	}}
}
