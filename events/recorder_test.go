package events_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

var ctx = context.Background()

func newRecorder(t testing.TB, limit int) (*events.Recorder, cache.Interface, *clocktesting.FakeClock, *metrics.Registry) {
	t.Helper()
	env := registrytest.New(t, registrytest.Options{})
	c := clocktesting.NewFakeClock(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	reg := metrics.New()
	r := events.New(events.Config{Client: env.Registry.Client("opemu-events"), Host: "pod-1", Limit: limit, TTL: time.Hour, Clock: c, Metrics: reg})
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

func TestSweepExpiresAndLimitsClientEvents(t *testing.T) {
	t.Parallel()
	r, store, c, _ := newRecorder(t, 2)
	r.Record(ctx, ev("old", "A"))
	c.Step(2 * time.Hour)
	r.Record(ctx, ev("new", "A"))
	// Events written by clients count too.
	for i := range 3 {
		_, err := store.Create(ctx, cache.Key{Resource: "events", Namespace: "default", Name: fmt.Sprint("client-", i)},
			map[string]any{"apiVersion": "v1", "kind": "Event", "lastTimestamp": c.Now().UTC().Format(time.RFC3339), "reason": "Client"},
			cache.WriteOptions{})
		require.NoError(t, err)
	}
	r.Sweep(ctx)
	res, err := store.List(ctx, events.Resource)
	require.NoError(t, err)
	assert.Len(t, res.Items, 2, "the TTL and the limit hold")
	for _, o := range res.Items {
		assert.NotContains(t, o.Key().Name, "old", "expired")
	}
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
