package registry

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// apiserverSource is the component name on the write path's Events.
const apiserverSource = "opemu-apiserver"

// recordsEvents reports whether writes to t are recorded (SPEC §7): client writes to a custom
// resource's main resource (and its scale), not status, not built-ins, not dry runs, not
// opemu's own writes (its components record their own Events).
func (s *Store) recordsEvents(t Target, o Options) bool {
	return s.cfg.Events != nil && !o.DryRun && !o.Internal && !t.Kind.BuiltIn() && (t.Sub == "" || t.Sub == "scale")
}

// recordWrite records a successful write of obj.
func (s *Store) recordWrite(ctx context.Context, t Target, o Options, obj *cache.Object, reason, verb string) {
	if !s.recordsEvents(t, o) {
		return
	}
	s.cfg.Events.Record(ctx, events.Event{
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
		// A rejected write does not create the namespace it was aimed at.
		if _, err := s.cfg.Storage.Get(ctx, namespaceKey(t.Key.Namespace)); err != nil {
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
	s.cfg.Events.Record(ctx, events.Event{
		Object: ref(t, name, uid, 0),
		Type:   events.TypeWarning, Severity: events.Warning, Reason: reason, Source: eventSource(o),
		Message: st.Status().Message,
	})
}

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

// makeRoomForEvent counts an Event a client creates at key against EVENT_LIMIT before it is
// stored (SPEC §7: every Event counts, and room is made before inserting), removing the oldest
// Events the limit no longer holds. It reports whether it counted the Event; countedEvent then
// settles the count with the store's answer.
func (s *Store) makeRoomForEvent(ctx context.Context, key cache.Key, obj map[string]any, o Options) bool {
	if s.cfg.EventLimit == nil || o.Internal || o.DryRun || key.GroupResource() != events.Resource {
		return false
	}
	last, err := time.Parse(time.RFC3339, stringOf(obj["lastTimestamp"]))
	if err != nil {
		last = s.cfg.Clock.Now()
	}
	evict, added := s.cfg.EventLimit.Track(key, last)
	s.removeEvents(ctx, evict)
	return added
}

// removeEvents deletes the Events the limit no longer holds.
func (s *Store) removeEvents(ctx context.Context, keys []cache.Key) {
	for _, k := range keys {
		if t, err := s.TargetOf(k); err == nil {
			_, _, _ = s.Delete(ctx, t, cache.Preconditions{}, Options{Internal: true})
		}
	}
}

// countedEvent settles the count of an Event counted at key: not stored, it is forgotten; stored
// under another (generated) name, it is counted under that one; evicted by the limit while it
// was being written (the oldest, by its lastTimestamp), it is removed now.
func (s *Store) countedEvent(ctx context.Context, key cache.Key, stored *cache.Object, err error) {
	if err != nil {
		s.cfg.EventLimit.Untrack(key)
		return
	}
	if stored.Key() != key {
		s.cfg.EventLimit.Untrack(key)
		key = stored.Key()
		evict, _ := s.cfg.EventLimit.Track(key, s.cfg.Clock.Now())
		s.removeEvents(ctx, evict)
	}
	if !s.cfg.EventLimit.Stored(key) {
		s.removeEvents(ctx, []cache.Key{key})
	}
}

// eventBuffers holds encoding buffers (*[]byte) of CreateEvent; the store copies what it keeps.
var eventBuffers = sync.Pool{New: func() any { return new([]byte) }}

// encodeEvent appends the recorder's Event ev as Stored.Object spells it (ts: its Time as
// RFC 3339 in UTC), stamped with uid and the creation time now and carrying
// cache.RVPlaceholder, exactly as the store's encoder would write that map (keys sorted;
// FuzzEncodeEvent compares the two), and where its resourceVersion member begins.
func encodeEvent(b []byte, ev events.Stored, ts, uid, now string) (_ []byte, versionAt int) {
	e, o := ev.Event, ev.Event.Object
	str := cache.AppendString
	b = append(b, `{"apiVersion":"v1","count":1,"eventTime":null,"firstTimestamp":"`...)
	b = append(append(b, ts...), `","involvedObject":{"apiVersion":`...)
	b = str(b, o.APIVersion)
	b = str(append(b, `,"kind":`...), o.Kind)
	b = str(append(b, `,"name":`...), o.Name)
	b = str(append(b, `,"namespace":`...), o.Namespace)
	b = str(append(b, `,"resourceVersion":`...), o.ResourceVersion)
	b = str(append(b, `,"uid":`...), o.UID)
	b = append(b, `},"kind":"Event","lastTimestamp":"`...)
	b = append(append(b, ts...), `","message":`...)
	b = str(b, e.Message)
	b = str(append(b, `,"metadata":{"creationTimestamp":`...), now)
	b = str(append(b, `,"generation":1,"name":`...), ev.Key.Name)
	b = str(append(b, `,"namespace":`...), ev.Key.Namespace)
	versionAt = len(b) + 1 // after the comma
	b = append(b, `,"resourceVersion":"`+cache.RVPlaceholder+`","uid":`...)
	b = str(b, uid)
	b = str(append(b, `},"reason":`...), e.Reason)
	b = str(append(b, `,"reportingComponent":`...), e.Source)
	b = str(append(b, `,"reportingInstance":`...), ev.Host)
	b = str(append(b, `,"severity":`...), string(e.Severity))
	b = str(append(b, `,"source":{"component":`...), e.Source)
	b = str(append(b, `,"host":`...), ev.Host)
	b = str(append(b, `},"type":`...), e.Type)
	return append(b, '}'), versionAt
}

// eventFields are the selectable fields of the recorder's Event ev (ts: its Time as RFC 3339 in
// UTC), as k (the Event kind) lists them, read from ev instead of a decoded object; known is
// false when k names one this does not know (the caller then goes through the decoded object).
func eventFields(k *kinds.Kind, ev events.Stored, ts string) (fields []string, known bool) {
	e, o := ev.Event, ev.Event.Object
	fields = make([]string, 0, 2*len(k.Fields))
	for _, f := range k.Fields {
		var v string
		switch f.Name {
		case "involvedObject.kind":
			v = o.Kind
		case "involvedObject.namespace":
			v = o.Namespace
		case "involvedObject.name":
			v = o.Name
		case "involvedObject.uid":
			v = o.UID
		case "involvedObject.apiVersion":
			v = o.APIVersion
		case "involvedObject.resourceVersion":
			v = o.ResourceVersion
		case "reason":
			v = e.Reason
		case "reportingComponent", "source":
			v = e.Source
		case "type":
			v = e.Type
		case "severity":
			v = string(e.Severity)
		case "lastTimestamp":
			v = ts
		case "count":
			v = "1"
		case "involvedObject.fieldPath", "series.lastObservedTime", "eventTime":
		default:
			return nil, false
		}
		fields = append(fields, f.Name, v)
	}
	return fields, true
}
