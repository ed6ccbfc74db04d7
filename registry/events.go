package registry

import (
	"context"
	"errors"
	"net/http"
	"strconv"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// apiserverSource is the component name on the write path's Events.
const apiserverSource = "opemu-apiserver"

// recordsEvents reports whether writes to t are recorded (SPEC §7): client writes to a custom
// resource's main resource (and its scale), not status, not built-ins, not dry runs, not
// opemu's own writes (its components record their own Events).
func (s *Store) recordsEvents(t Target, o Options) bool {
	return s.events != nil && !o.DryRun && !o.Internal && !t.Kind.BuiltIn() && (t.Sub == "" || t.Sub == "scale")
}

// recordWrite records a successful write of obj.
func (s *Store) recordWrite(ctx context.Context, t Target, o Options, obj *cache.Object, reason, verb string) {
	if !s.recordsEvents(t, o) {
		return
	}
	s.events.Record(eventContext(ctx), events.Event{
		Object: ref(t, obj.Key().Name, obj.UID(), obj.ResourceVersion()),
		Type:   events.TypeNormal, Severity: events.Info, Reason: reason, Source: eventSource(o),
		Message: verb + " " + t.Kind.Kind + " " + objectName(obj.Key()),
	})
}

// recordRejection records a write refused by validation (422) or admission (403) as a Warning
// on the attempted object.
func (s *Store) recordRejection(ctx context.Context, t Target, o Options, name, uid string, err error) {
	if !s.recordsEvents(t, o) || name == "" {
		return
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return
	}
	if t.Kind.Namespaced {
		// No Event into a namespace that is missing or Terminating: it would be refused (404,
		// 403), and the refusal of a create there is the namespace's, not admission's.
		if ns, err := s.cfg.Storage.Get(ctx, namespaceKey(t.Key.Namespace)); err != nil || ns.Deleting() {
			return
		}
	}
	reason := ""
	switch st.Status().Code {
	case http.StatusUnprocessableEntity:
		reason = "ValidationFailed"
	case http.StatusForbidden:
		reason = "AdmissionDenied"
	default:
		return
	}
	s.events.Record(eventContext(ctx), events.Event{
		Object: ref(t, name, uid, 0),
		Type:   events.TypeWarning, Severity: events.Warning, Reason: reason, Source: eventSource(o),
		Message: st.Status().Message,
	})
}

// eventContext is the context the Event of a request's write is recorded in: the request's,
// without its deadline or cancellation. The Event is not the client's write (kube-apiserver's
// components record theirs apart from any request), and a rejection that took long to judge
// (a megabyte name under load) must still leave its Warning.
func eventContext(ctx context.Context) context.Context { return context.WithoutCancel(ctx) }

// eventSource is the Event source of a write: the authenticated user who made it (SPEC §13), or
// the API server when authentication is off.
func eventSource(o Options) string {
	if o.User != "" {
		return o.User
	}
	return apiserverSource
}

func ref(t Target, name, uid string, rv uint64) events.Ref {
	r := events.Ref{APIVersion: t.Kind.GroupVersion(), Kind: t.Kind.Kind, Namespace: t.Key.Namespace, Name: name, UID: uid}
	if rv != 0 {
		r.ResourceVersion = strconv.FormatUint(rv, 10)
	}
	return r
}

func objectName(k cache.Key) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}
