package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	clocktesting "k8s.io/utils/clock/testing"
)

var ctx = context.Background()

// newRecorder is a recorder over the standard core whose Event kind keeps at most limit Events
// (zero: no limit).
func newRecorder(t testing.TB, limit int) (*events.Recorder, cache.Interface, *clocktesting.FakeClock, *metrics.Registry) {
	t.Helper()
	env := registrytest.New(t, registrytest.Options{EventLimit: limit})
	env.Namespaces(t, "team") // the tests' other namespace
	c := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	reg := metrics.New()
	r := events.New(events.Config{Client: env.Registry.Client("opemu-events"), Host: "pod-1", TTL: time.Hour, Clock: c, Metrics: reg})
	return r, env.Storage, c, reg
}

func ev(name, reason string) events.Event {
	return events.Event{
		Object: events.Ref{APIVersion: "cloudnative.elide.dev/v1", Kind: "Application", Namespace: "default", Name: name, UID: "uid-" + name},
		Type:   events.TypeNormal, Severity: events.Info, Reason: reason, Message: reason + " " + name, Source: "test",
	}
}

func all(t testing.TB, r *events.Recorder, q events.Query) []map[string]any {
	t.Helper()
	q.Limit = 1 << 20
	raw, err := r.Query(ctx, q)
	require.NoError(t, err)
	out := make([]map[string]any, len(raw))
	for i, b := range raw {
		require.NoError(t, json.Unmarshal(b, &out[i]))
	}
	return out
}

func TestRecordShape(t *testing.T) {
	t.Parallel()
	r, _, _, reg := newRecorder(t, 0)
	r.Record(ctx, events.Event{Object: events.Ref{Kind: "Application", Namespace: "team", Name: "web", UID: "u1"},
		Type: events.TypeWarning, Severity: events.Critical, Reason: "ReconcileFailed", Message: "gave up", Source: "application-controller"})
	got := all(t, r, events.Query{})
	require.Len(t, got, 1)
	e := got[0]
	assert.Equal(t, "Event", e["kind"])
	assert.Equal(t, "v1", e["apiVersion"])
	assert.Equal(t, "team", e["metadata"].(map[string]any)["namespace"])
	assert.Equal(t, "web", e["involvedObject"].(map[string]any)["name"])
	assert.Equal(t, "Warning", e["type"])
	assert.Equal(t, "Critical", e["severity"])
	assert.Equal(t, "ReconcileFailed", e["reason"])
	assert.Equal(t, "application-controller", e["source"].(map[string]any)["component"])
	assert.Equal(t, "pod-1", e["source"].(map[string]any)["host"])
	assert.EqualValues(t, 1, e["count"])
	assert.Equal(t, "2026-11-22T10:00:00Z", e["firstTimestamp"])
	mfs, _ := reg.Gatherer().Gather()
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "event_total" {
			found = mf.GetMetric()[0].GetCounter().GetValue() == 1
		}
	}
	assert.True(t, found, "event_total moves")
}

func TestAggregation(t *testing.T) {
	t.Parallel()
	r, _, c, _ := newRecorder(t, 0)
	r.Record(ctx, ev("web", "Scaling"))
	c.Step(30 * time.Second)
	e := ev("web", "Scaling")
	e.Message = "the latest message"
	r.Record(ctx, e)
	got := all(t, r, events.Query{})
	require.Len(t, got, 1, "identical events within 60 s aggregate")
	assert.EqualValues(t, 2, got[0]["count"])
	assert.Equal(t, "the latest message", got[0]["message"])
	assert.Equal(t, "2026-11-22T10:00:00Z", got[0]["firstTimestamp"])
	assert.Equal(t, "2026-11-22T10:00:30Z", got[0]["lastTimestamp"])

	r.Record(ctx, ev("web", "Other"))
	r.Record(ctx, ev("db", "Scaling"))
	w := ev("web", "Scaling")
	w.Type = events.TypeWarning
	r.Record(ctx, w)
	assert.Len(t, all(t, r, events.Query{}), 4, "another reason, object or type is another Event")

	c.Step(61 * time.Second)
	r.Record(ctx, ev("web", "Scaling"))
	assert.Len(t, all(t, r, events.Query{Reason: "Scaling", Name: "web", Type: "Normal"}), 2, "after the window a new Event starts")

	st, err := r.Stats(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, st.Aggregated)
	assert.Equal(t, 5, st.Total)
	assert.Equal(t, 4, st.ByType["Normal"])
	assert.Equal(t, 1, st.ByType["Warning"])
}

// TestLimitHoldsUnderFlood records 50,000 distinct Events with a limit of 1,000.
func TestLimitHoldsUnderFlood(t *testing.T) {
	t.Parallel()
	const limit = 1000
	r, store, c, _ := newRecorder(t, limit)
	for i := range 50000 {
		if i%100 == 0 {
			c.Step(time.Second)
		}
		r.Record(ctx, ev(fmt.Sprint("obj-", i), "Flood"))
	}
	res, err := store.List(ctx, events.Resource)
	require.NoError(t, err)
	assert.Len(t, res.Items, limit)
	got := all(t, r, events.Query{})
	assert.Equal(t, "obj-49999", got[len(got)-1]["involvedObject"].(map[string]any)["name"], "the newest are kept")
	assert.Equal(t, "obj-49000", got[0]["involvedObject"].(map[string]any)["name"])
}

// TestSweepExpiresClientEvents: the sweep removes every Event last seen more than TTL ago,
// those clients created too, and keeps the others.
func TestSweepExpiresClientEvents(t *testing.T) {
	t.Parallel()
	r, store, c, _ := newRecorder(t, 0)
	r.Record(ctx, ev("old", "A"))
	for i, at := range []time.Time{c.Now(), c.Now().Add(90 * time.Minute)} {
		_, err := store.Create(ctx, cache.Key{Resource: "events", Namespace: "default", Name: fmt.Sprint("client-", i)},
			map[string]any{"apiVersion": "v1", "kind": "Event", "lastTimestamp": at.UTC().Format(time.RFC3339), "reason": "Client"},
			cache.WriteOptions{})
		require.NoError(t, err)
	}
	c.Step(2 * time.Hour)
	r.Record(ctx, ev("new", "A"))
	r.Sweep(ctx)
	res, err := store.List(ctx, events.Resource)
	require.NoError(t, err)
	var kept []string
	for _, o := range res.Items {
		kept = append(kept, o.Key().Name)
	}
	require.Len(t, kept, 2, "the TTL holds: %v", kept)
	assert.Contains(t, kept, "client-1", "seen 30 minutes ago")
	assert.Contains(t, strings.Join(kept, " "), "new.", "just recorded")
}

// Events written through events.k8s.io/v1 have no lastTimestamp: their series' last
// observation, or their eventTime, says when they were last seen.
func TestSweepExpiresEventsWithoutLastTimestamp(t *testing.T) {
	t.Parallel()
	r, store, c, _ := newRecorder(t, 100)
	micro := func(at time.Time) string { return at.UTC().Format("2006-01-02T15:04:05.000000Z07:00") }
	old := c.Now()
	c.Step(2 * time.Hour)
	for name, fields := range map[string]map[string]any{
		"old-event-time": {"eventTime": micro(old)},
		"old-series":     {"eventTime": micro(old), "series": map[string]any{"count": json.Number("2"), "lastObservedTime": micro(old)}},
		"new-series":     {"eventTime": micro(old), "series": map[string]any{"count": json.Number("2"), "lastObservedTime": micro(c.Now())}},
		"new-event-time": {"eventTime": micro(c.Now())},
	} {
		obj := map[string]any{"apiVersion": "v1", "kind": "Event", "reason": "Client"}
		for k, v := range fields {
			obj[k] = v
		}
		_, err := store.Create(ctx, cache.Key{Resource: "events", Namespace: "default", Name: name}, obj, cache.WriteOptions{})
		require.NoError(t, err)
	}
	r.Sweep(ctx)
	res, err := store.List(ctx, events.Resource)
	require.NoError(t, err)
	var names []string
	for _, o := range res.Items {
		names = append(names, o.Key().Name)
	}
	assert.ElementsMatch(t, []string{"new-series", "new-event-time"}, names)
}

func TestQueryFilters(t *testing.T) {
	t.Parallel()
	r, _, c, _ := newRecorder(t, 0)
	r.Record(ctx, ev("web", "Created"))
	c.Step(time.Minute)
	warn := ev("web", "ValidationFailed")
	warn.Type, warn.Severity = events.TypeWarning, events.Warning
	r.Record(ctx, warn)
	c.Step(time.Minute)
	other := ev("db", "Created")
	other.Object.Namespace = "team"
	r.Record(ctx, other)

	names := func(q events.Query) []string {
		var out []string
		raw, err := r.Query(ctx, q)
		require.NoError(t, err)
		for _, b := range raw {
			var m map[string]any
			require.NoError(t, json.Unmarshal(b, &m))
			out = append(out, m["involvedObject"].(map[string]any)["name"].(string)+"/"+m["reason"].(string))
		}
		return out
	}
	assert.Equal(t, []string{"web/Created", "web/ValidationFailed", "db/Created"}, names(events.Query{}), "oldest first")
	assert.Equal(t, []string{"db/Created"}, names(events.Query{Namespace: "team"}))
	assert.Equal(t, []string{"web/ValidationFailed"}, names(events.Query{Type: "Warning"}))
	assert.Equal(t, []string{"web/ValidationFailed"}, names(events.Query{Severity: "Warning"}))
	assert.Equal(t, []string{"web/Created", "db/Created"}, names(events.Query{Reason: "Created"}))
	assert.Equal(t, []string{"web/Created", "web/ValidationFailed"}, names(events.Query{Name: "web", Kind: "Application"}))
	assert.Equal(t, []string{"web/ValidationFailed", "db/Created"}, names(events.Query{Since: time.Date(2026, 11, 22, 10, 1, 0, 0, time.UTC)}))
	assert.Equal(t, []string{"db/Created"}, names(events.Query{Limit: 1}), "limit keeps the newest")
}

func TestNilRecorder(t *testing.T) {
	t.Parallel()
	var r *events.Recorder
	assert.NotPanics(t, func() { r.Record(ctx, ev("x", "y")) })
}

// TestRecordBoundsWhatRejectedInputCarries: an Event about an object with a 1 MB name and a
// 1 MB message is stored small and valid, as client-go's recorders would make it.
func TestRecordBoundsWhatRejectedInputCarries(t *testing.T) {
	t.Parallel()
	r, store, _, _ := newRecorder(t, 0)
	huge := strings.Repeat("x", 1<<20)
	e := ev(huge, "ValidationFailed")
	e.Message = `metadata.name: Invalid value: "` + huge + `"`
	r.Record(ctx, e)
	r.Record(ctx, ev("web", "Created"))
	r.Record(ctx, ev("Not_A_DNS.Name", "Created"))
	res, err := store.List(ctx, events.Resource)
	require.NoError(t, err)
	require.Len(t, res.Items, 3, "all three stored: their names are valid")
	var names []string
	for _, o := range res.Items {
		assert.Empty(t, apivalidation.NameIsDNSSubdomain(o.Key().Name, false), "a valid Event name: %.80s", o.Key().Name)
		assert.Less(t, len(o.Raw()), 4096, "stored small: %d bytes", len(o.Raw()))
		names = append(names, o.Key().Name)
	}
	got := all(t, r, events.Query{Reason: "ValidationFailed"})
	require.Len(t, got, 1)
	assert.Len(t, got[0]["message"], events.MaxMessageBytes)
	assert.Len(t, got[0]["involvedObject"].(map[string]any)["name"], events.MaxNameBytes)
	assert.Contains(t, strings.Join(names, " "), "web.", "a valid object name gives <name>.<hex>")
}

func TestTruncatesOnRuneBoundaries(t *testing.T) {
	t.Parallel()
	r, _, _, _ := newRecorder(t, 0)
	e := ev("web", "Unicode")
	e.Message = strings.Repeat("é", 1000) // 2,000 bytes
	r.Record(ctx, e)
	msg := all(t, r, events.Query{})[0]["message"].(string)
	assert.True(t, utf8.ValidString(msg))
	assert.Len(t, msg, events.MaxMessageBytes)
}

// TestQueue: with a queue, Record returns before the Event is written and Work writes it, with
// the time it was recorded at; a full queue writes the Event in Record itself, so none is lost.
func TestQueue(t *testing.T) {
	t.Parallel()
	env := registrytest.New(t, registrytest.Options{})
	c := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	r := events.New(events.Config{Client: env.Registry.Client("opemu-events"), Host: "pod-1", Clock: c, Queue: 2})
	recorded := c.Now()
	for i := range 3 { // the third finds the queue full
		r.Record(ctx, ev(fmt.Sprint("app-", i), "Created"))
	}
	got := all(t, r, events.Query{})
	require.Len(t, got, 1, "two wait in the queue, the third was written at once")
	assert.Equal(t, "app-2", got[0]["involvedObject"].(map[string]any)["name"])
	c.Step(time.Minute)
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Work(wctx) }()
	require.Eventually(t, func() bool { return len(all(t, r, events.Query{})) == 3 }, 5*time.Second, 5*time.Millisecond)
	for _, e := range all(t, r, events.Query{}) {
		assert.Equal(t, recorded.Format(time.RFC3339), e["firstTimestamp"], "stamped when recorded, not when written")
	}
	cancel()
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Work did not return after its context ended")
	}
}
