package kinds

import (
	"encoding/json"
	"fmt"

	"github.com/opemu/opemu/cache"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// events.k8s.io/v1 Event is a second view of the v1 Events, as kube-apiserver serves both:
// the objects are stored once, as v1 Events, and converted field by field on every read and
// write through events.k8s.io (controller-runtime's and client-go's new recorders write there,
// `kubectl events` and `describe` read v1).

// EventsV1Kind is events.k8s.io/v1 Event, a view of the v1 Events.
func (ts *typeSet) eventsV1Kind() *Kind {
	k := ts.kind(typed{obj: &eventsv1.Event{}, short: []string{"ev"}, columns: eventsV1Columns(), validate: validator(validateEventsV1),
		validateCreate: validator(validateEventsV1Create), createOnUpdate: true})
	k.Conversion = &Conversion{
		Storage:     Events,
		ToStorage:   eventToCore,
		FromStorage: eventFromCore,
		FieldLabels: map[string]string{
			"regarding.kind": "involvedObject.kind", "regarding.namespace": "involvedObject.namespace",
			"regarding.name": "involvedObject.name", "regarding.uid": "involvedObject.uid",
			"regarding.apiVersion": "involvedObject.apiVersion", "regarding.resourceVersion": "involvedObject.resourceVersion",
			"regarding.fieldPath": "involvedObject.fieldPath", "reason": "reason", "type": "type",
			"reportingController": "reportingComponent", "deprecatedSource": "source",
		},
	}
	return k
}

// eventToCore converts an events.k8s.io/v1 Event into the v1 Event it is stored as. The
// severity opemu adds to v1 Events (SPEC §11), which the view cannot express, is kept from old.
func eventToCore(obj, old map[string]any) (map[string]any, error) {
	var e eventsv1.Event
	if err := fromMap(obj, &e); err != nil {
		return nil, err
	}
	c := corev1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: e.ObjectMeta, InvolvedObject: e.Regarding, Related: e.Related,
		Reason: e.Reason, Message: e.Note, Type: e.Type, Action: e.Action,
		Source: e.DeprecatedSource, FirstTimestamp: e.DeprecatedFirstTimestamp, LastTimestamp: e.DeprecatedLastTimestamp,
		Count: e.DeprecatedCount, EventTime: e.EventTime,
		ReportingController: e.ReportingController, ReportingInstance: e.ReportingInstance,
	}
	if e.Series != nil {
		c.Series = &corev1.EventSeries{Count: e.Series.Count, LastObservedTime: e.Series.LastObservedTime}
	}
	out, err := toMap(&c)
	if err != nil {
		return nil, err
	}
	if sev, ok := old["severity"]; ok {
		out["severity"] = sev
	}
	return out, nil
}

// eventFromCore converts a stored v1 Event into its events.k8s.io/v1 view.
func eventFromCore(obj map[string]any) (map[string]any, error) {
	var c corev1.Event
	if err := fromMap(obj, &c); err != nil {
		return nil, err
	}
	e := eventsv1.Event{
		TypeMeta:   metav1.TypeMeta{APIVersion: "events.k8s.io/v1", Kind: "Event"},
		ObjectMeta: c.ObjectMeta, Regarding: c.InvolvedObject, Related: c.Related,
		Reason: c.Reason, Note: c.Message, Type: c.Type, Action: c.Action,
		DeprecatedSource: c.Source, DeprecatedFirstTimestamp: c.FirstTimestamp, DeprecatedLastTimestamp: c.LastTimestamp,
		DeprecatedCount: c.Count, EventTime: c.EventTime,
		ReportingController: c.ReportingController, ReportingInstance: c.ReportingInstance,
	}
	if c.Series != nil {
		e.Series = &eventsv1.EventSeries{Count: c.Series.Count, LastObservedTime: c.Series.LastObservedTime}
	}
	return toMap(&e)
}

// validateEventsV1 checks what kube-apiserver requires of an Event written through
// events.k8s.io/v1: when and by whom it was reported, and what happened.
// validateEventsV1 is the legacy validation kube-apiserver gives every Event written through
// events.k8s.io/v1 (legacyValidateEvent, an Event with an eventTime), under the core Event's
// field names (it validates its internal Event: the note is "message").
func validateEventsV1(e *eventsv1.Event) field.ErrorList {
	var errs field.ErrorList
	tooLong := func(path, v string, max int) {
		if len(v) > max {
			errs = append(errs, field.Invalid(field.NewPath(path), "", fmt.Sprintf("can have at most %d characters", max)))
		}
	}
	if !e.EventTime.IsZero() {
		if e.ReportingController == "" {
			errs = append(errs, field.Required(field.NewPath("reportingController"), ""))
		}
		errs = append(errs, stringErrors(field.NewPath("reportingController"), e.ReportingController, validation.IsQualifiedName(e.ReportingController))...)
		for _, f := range []struct{ name, v string }{{"reportingInstance", e.ReportingInstance}, {"action", e.Action}, {"reason", e.Reason}} {
			if f.v == "" {
				errs = append(errs, field.Required(field.NewPath(f.name), ""))
			}
			tooLong(f.name, f.v, 128)
		}
		tooLong("message", e.Note, 1024)
	}
	if sr := e.Series; sr != nil {
		if sr.Count < 2 {
			errs = append(errs, field.Invalid(field.NewPath("series.count"), "", "should be at least 2"))
		}
		if sr.LastObservedTime.IsZero() {
			errs = append(errs, field.Required(field.NewPath("series.lastObservedTime"), ""))
		}
	}
	return errs
}

// validateEventsV1Create is what ValidateEventCreate adds for a new Event written through
// events.k8s.io/v1 (an update keeps what older clients wrote).
func validateEventsV1Create(e *eventsv1.Event) field.ErrorList {
	var errs field.ErrorList
	if e.EventTime.IsZero() {
		errs = append(errs, field.Required(field.NewPath("eventTime"), ""))
	}
	if e.Type != corev1.EventTypeNormal && e.Type != corev1.EventTypeWarning {
		errs = append(errs, field.Invalid(field.NewPath("type"), "", "has invalid value: "+e.Type))
	}
	for _, f := range []struct {
		name string
		set  bool
	}{{"firstTimestamp", !e.DeprecatedFirstTimestamp.IsZero()}, {"lastTimestamp", !e.DeprecatedLastTimestamp.IsZero()},
		{"count", e.DeprecatedCount != 0}, {"source", e.DeprecatedSource.Component != "" || e.DeprecatedSource.Host != ""}} {
		if f.set {
			errs = append(errs, field.Invalid(field.NewPath(f.name), "", "needs to be unset"))
		}
	}
	return errs
}

func fromMap(obj map[string]any, v any) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}

func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return cache.DecodeJSON(raw)
}

// eventsV1Columns are the v1 Event's columns over the events.k8s.io fields.
func eventsV1Columns() []Column { return eventColumns(eventsV1Fields) }
