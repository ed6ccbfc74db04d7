package registry

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/stretchr/testify/require"
)

// The fuzz target of the recorder's shortcut (create_fast.go); FuzzRecorderEvent, in package
// events, holds the shortcut's whole result to the full write path's.

// FuzzEncodeEvent: the recorder's Events written directly are byte for byte what the store's
// encoder writes for the same Event decoded (events.Stored.Object, stamped), whatever text
// they carry.
func FuzzEncodeEvent(f *testing.F) {
	f.Add("Application", "web", "Created", "Created Application default/web", "opemu-apiserver", "pod-1", "\u2028<&>")
	f.Add("", "", "", "\xff\xfe", "", "", "\"\\")
	f.Fuzz(func(t *testing.T, kind, name, reason, message, source, host, uid string) {
		ev := events.Stored{
			Key: cache.Key{Resource: "events", Namespace: "ns", Name: name + ".1"},
			Event: events.Event{Object: events.Ref{APIVersion: "v1", Kind: kind, Namespace: "ns", Name: name, UID: uid, ResourceVersion: "3"},
				Type: "Normal", Severity: events.Info, Reason: reason, Message: message, Source: source},
			Host: host, Time: time.Date(2026, 11, 24, 8, 0, 0, 0, time.FixedZone("x", 3600)),
		}
		obj := ev.Object()
		md := metadataOf(obj)
		md["uid"], md["creationTimestamp"], md["generation"], md["resourceVersion"] = uid, "2026-11-24T09:00:00Z", json.Number("1"), cache.RVPlaceholder
		fields := map[string]any{"f:message": map[string]any{}, "f:reason": map[string]any{}}
		md["managedFields"] = []any{map[string]any{"apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": fields,
			"manager": source, "operation": "Update", "time": "2026-11-24T09:00:01Z"}}
		want, err := cache.EncodeJSON(obj)
		require.NoError(t, err)
		fv1, err := cache.EncodeJSON(fields)
		require.NoError(t, err)
		m := eventManaged{manager: source, fieldsV1: fv1, time: "2026-11-24T09:00:01Z"}
		got, at := encodeEvent(nil, ev, ev.Time.UTC().Format(time.RFC3339), uid, "2026-11-24T09:00:00Z", m)
		require.Equal(t, string(want), string(got))
		require.True(t, strings.HasPrefix(string(got[at:]), `"resourceVersion":"`+cache.RVPlaceholder+`"`), "versionAt points at the member")
	})
}
