package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
)

// The recorder's shortcut (DESIGN.md, "Shortcuts"): the Event SPEC §7 records with every client
// write is a second stored object per write, so over the in-memory store the recorder's new
// Events are written as bytes with their index, skipping what Create (create.go) does with a
// decoded map. Held to the general path by FuzzRecorderEvent (package events: the full path
// stores the same object) and FuzzEncodeEvent (create_fast_internal_test.go: the bytes are the store
// encoder's).

// CreateEvent stores an Event the recorder built (events.Recorder). Such an Event is valid by
// construction (its fields bounded, its name generated), so over a store that takes encoded
// objects (the in-memory one) its bytes and index are written directly (encodeEvent) instead
// of a decoded map going through the pruning, defaulting, admission and validation a client's
// Event goes through, and through the store's encoder. It still takes the Event kind's TTL and
// limit and the namespace's rules (storeNew). Over any other store (etcd, where the Event's
// round trip dwarfs what this saves), with admission webhooks configured (they see it as any
// Event), or for a kind with a Lifecycle, it takes Create's full path.
func (c *Client) CreateEvent(ctx context.Context, ev events.Stored) (*cache.Object, error) {
	key := ev.Key
	t, err := c.s.TargetOf(key)
	if err != nil {
		return nil, err
	}
	enc, direct := c.s.cfg.Storage.(cache.EncodedCreator)
	if !direct || key.Name == "" || key.GroupResource() != events.Resource || t.Kind.Lifecycle != nil || c.s.cfg.Admission.HasConfigured() {
		return c.Create(ctx, key, ev.Object())
	}
	lastSeen := ev.Time.UTC().Format(time.RFC3339)
	fields, known := eventFields(t.Kind, ev, lastSeen)
	if !known {
		return c.Create(ctx, key, ev.Object())
	}
	o := c.options()
	managed, err := c.s.eventManagedFields(t, ev, o)
	if err != nil {
		return nil, err
	}
	if err := beforeCommit(ctx); err != nil {
		return nil, err
	}
	start := time.Now()
	obj, err := c.s.storeNew(ctx, t.Kind, key, o, func() (*cache.Object, error) {
		bp := eventBuffers.Get().(*[]byte)
		defer eventBuffers.Put(bp)
		uid := c.s.cfg.NewUID()
		var at int
		*bp, at = encodeEvent((*bp)[:0], ev, lastSeen, uid, c.s.now(), managed)
		return enc.CreateEncoded(ctx, key, cache.Encoded{JSON: *bp, VersionAt: at, UID: uid, Generation: 1, Fields: fields}, storeOptions(t.Kind, o))
	})
	c.record(ctx, "create", key, "", start, obj, err)
	return obj, err
}

// eventManaged is the managedFields entry of a recorder's Event: its manager, the set of its
// fields (fieldsV1 as the store encodes it) and the time of the write (RFC 3339, UTC).
type eventManaged struct {
	manager  string
	fieldsV1 []byte
	time     string
}

// eventManagedFields is the managedFields entry trackCreate would record for ev, an Event of
// the recorder written with o: its set of fields is the same for every such Event (encodeEvent
// writes every member, whatever its value) but for the two its Go type always encodes, which
// are owned only when not empty (reportingComponent and reportingInstance), so the field
// manager computes it once per manager and those two. The time is the wall clock's, as the
// field manager's.
func (s *Store) eventManagedFields(t Target, ev events.Stored, o Options) (eventManaged, error) {
	m := eventManaged{manager: writeManager(o), time: time.Now().UTC().Format(time.RFC3339)}
	key := fmt.Sprintf("%t %t %s", ev.Event.Source != "", ev.Host != "", m.manager)
	if fv, ok := s.eventFieldSets.Load(key); ok {
		m.fieldsV1 = fv.([]byte)
		return m, nil
	}
	obj := ev.Object()
	if err := s.trackCreate(t, obj, o); err != nil {
		return eventManaged{}, err
	}
	entries, err := managedFieldsOf(obj)
	if err != nil {
		return eventManaged{}, err
	}
	if len(entries) != 1 || entries[0].FieldsV1 == nil {
		return eventManaged{}, serverError("the field manager made no single entry for an Event")
	}
	var fields any
	if err := json.Unmarshal(entries[0].FieldsV1.Raw, &fields); err != nil {
		return eventManaged{}, err
	}
	if m.fieldsV1, err = cache.EncodeJSON(fields); err != nil {
		return eventManaged{}, err
	}
	s.eventFieldSets.Store(key, m.fieldsV1)
	return m, nil
}

// eventBuffers holds encoding buffers (*[]byte) of CreateEvent; the store copies what it keeps.
var eventBuffers = sync.Pool{New: func() any { return new([]byte) }}

// encodeEvent appends the recorder's Event ev as Stored.Object spells it (ts: its Time as
// RFC 3339 in UTC), stamped with uid, the creation time now and the managedFields entry m and
// carrying cache.RVPlaceholder, exactly as the store's encoder would write that map (keys
// sorted; FuzzEncodeEvent compares the two), and where its resourceVersion member begins.
func encodeEvent(b []byte, ev events.Stored, ts, uid, now string, m eventManaged) (_ []byte, versionAt int) {
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
	b = append(b, `,"generation":1,"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":`...)
	b = str(append(append(b, m.fieldsV1...), `,"manager":`...), m.manager)
	b = str(append(b, `,"operation":"Update","time":`...), m.time)
	b = str(append(b, `}],"name":`...), ev.Key.Name)
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
