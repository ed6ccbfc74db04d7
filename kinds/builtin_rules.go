package kinds

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The rules of the built-in kinds kept as sent (v1 Event, Lease): no pruning or defaults, but
// kube-apiserver's validation (coordination/validation, core/validation/events.go).

// rulesOnly is the Schema of a kind kept as sent that has validation rules: obj decodes into
// T, then check judges it.
type rulesOnly[T any] struct {
	check func(*T) field.ErrorList
}

func (rulesOnly[T]) Prune(map[string]any) []string { return nil }

func (rulesOnly[T]) keptAsSent() {}

// Prunes reports whether s removes what its kind does not declare; the schemas of kinds kept as
// sent (v1 Event, Lease) only validate, so their Prune says nothing of the fields their Go type
// lacks.
func Prunes(s Schema) bool {
	_, kept := s.(interface{ keptAsSent() })
	return !kept
}

func (rulesOnly[T]) Default(map[string]any) {}

func (r rulesOnly[T]) Validate(obj map[string]any) field.ErrorList {
	raw, err := json.Marshal(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return field.ErrorList{&field.Error{Type: field.ErrorTypeTypeInvalid, Field: te.Field, BadValue: te.Value, Detail: "must be of type " + jsonTypeName(te.Type)}}
		}
		return field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), stringAt(obj, "metadata.name"), "the object cannot be decoded: "+err.Error())}
	}
	return r.check(&v)
}

// OpenAPI is an object keeping unknown fields, as the kinds without a schema are described.
func (rulesOnly[T]) OpenAPI() *apiextv1.JSONSchemaProps {
	preserve := true
	return &apiextv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve, Properties: map[string]apiextv1.JSONSchemaProps{
		"apiVersion": {Type: "string"}, "kind": {Type: "string"}, "metadata": {Type: "object"},
	}}
}

// validateLease is ValidateLeaseSpec.
func validateLease(l *coordinationv1.Lease) field.ErrorList {
	s := &l.Spec
	var errs field.ErrorList
	if d := s.LeaseDurationSeconds; d != nil && *d <= 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseDurationSeconds"), d, "must be greater than 0"))
	}
	if t := s.LeaseTransitions; t != nil && *t < 0 {
		errs = append(errs, field.Invalid(specPath.Child("leaseTransitions"), t, "must be greater than or equal to 0"))
	}
	if st := s.Strategy; st != nil {
		p := specPath.Child("strategy").Child("strategy")
		if !strings.Contains(string(*st), "/") {
			if valid := []coordinationv1.CoordinatedLeaseStrategy{coordinationv1.OldestEmulationVersion}; !slices.Contains(valid, *st) {
				errs = append(errs, field.NotSupported(p, *st, valid))
			}
		} else {
			errs = append(errs, stringErrors(p, string(*st), validation.IsQualifiedName(string(*st)))...)
		}
	}
	if h := s.PreferredHolder; h != nil && *h != "" && (s.Strategy == nil || *s.Strategy == "") {
		errs = append(errs, field.Forbidden(specPath.Child("preferredHolder"), "may only be specified if `strategy` is defined"))
	}
	return errs
}

// validateCoreEvent is legacyValidateEvent for a v1 request, all kube-apiserver checks of an
// Event written through the v1 API (events.k8s.io adds its own, in eventsview.go).
func validateCoreEvent(e *corev1.Event) field.ErrorList {
	var errs field.ErrorList
	nsMismatch := func() {
		errs = append(errs, field.Invalid(field.NewPath("involvedObject", "namespace"), e.InvolvedObject.Namespace, "does not match event.namespace"))
	}
	if e.EventTime.IsZero() {
		switch {
		case e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceNone && e.Namespace != metav1.NamespaceDefault:
			nsMismatch()
		case e.InvolvedObject.Namespace != "" && e.Namespace != e.InvolvedObject.Namespace:
			nsMismatch()
		}
		return errs
	}
	if e.InvolvedObject.Namespace == "" && e.Namespace != metav1.NamespaceDefault && e.Namespace != metav1.NamespaceSystem {
		nsMismatch()
	}
	if e.ReportingController == "" {
		errs = append(errs, field.Required(field.NewPath("reportingComponent"), ""))
	}
	errs = append(errs, stringErrors(field.NewPath("reportingComponent"), e.ReportingController, validation.IsQualifiedName(e.ReportingController))...)
	for _, f := range []struct {
		name, v string
		max     int
	}{{"reportingInstance", e.ReportingInstance, 128}, {"action", e.Action, 128}, {"reason", e.Reason, 128}} {
		if f.v == "" {
			errs = append(errs, field.Required(field.NewPath(f.name), ""))
		}
		if len(f.v) > f.max {
			errs = append(errs, field.Invalid(field.NewPath(f.name), "", fmt.Sprintf("can have at most %d characters", f.max)))
		}
	}
	if len(e.Message) > 1024 {
		errs = append(errs, field.Invalid(field.NewPath("message"), "", "can have at most 1024 characters"))
	}
	return errs
}
