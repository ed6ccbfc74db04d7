package application_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder keeps Events in memory.
type recorder struct {
	mu  sync.Mutex
	evs []events.Event
}

func (r *recorder) Record(_ context.Context, ev events.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
}

func (r *recorder) reasons(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.evs {
		if e.Object.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}

func (r *recorder) find(reason string) (events.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.evs {
		if e.Reason == reason {
			return e, true
		}
	}
	return events.Event{}, false
}

// rig is a store, the Application reconciler and a running controller, inside a synctest
// bubble so that time is virtual.
type rig struct {
	t       *testing.T
	store   cache.Interface
	client  *registry.Client // writes as a client would, through the write path
	app     *application.Reconciler
	ctrl    *reconciler.Controller
	events  *recorder
	metrics *metrics.Registry
	stop    func()
}

func newRig(t *testing.T, step time.Duration, tweak ...func(*reconciler.Config)) *rig {
	t.Helper()
	env := apptest.New(t, apptest.Options{})
	store := env.Storage
	rec := &recorder{}
	app := application.New(application.Config{Client: env.Registry.Client(application.Source), Events: rec, RolloutStep: step})
	reg := metrics.New()
	cfg := reconciler.Config{Store: store, Resource: cachetest.Applications, Reconciler: app, Name: "application", Tuning: reconciler.Tuning{Metrics: reg}}
	for _, f := range tweak {
		f(&cfg)
	}
	ctrl, err := reconciler.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = ctrl.Run(ctx); close(done) }()
	r := &rig{t: t, store: store, client: env.Registry.Client("test"), app: app, ctrl: ctrl, events: rec, metrics: reg}
	r.stop = func() {
		cancel()
		<-done
		store.Close()
	}
	return r
}

var ctx = context.Background()

func (r *rig) create(name string, replicas int, annotations map[string]any) {
	r.t.Helper()
	obj := cachetest.App(name, replicas)
	if annotations != nil {
		obj["metadata"].(map[string]any)["annotations"] = annotations
	}
	_, err := r.client.Create(ctx, cachetest.Key("default", name), obj)
	require.NoError(r.t, err)
}

func (r *rig) scale(name string, replicas int) {
	r.t.Helper()
	o, err := r.store.Get(ctx, cachetest.Key("default", name))
	require.NoError(r.t, err)
	obj := cachetest.Decode(r.t, o)
	delete(obj["metadata"].(map[string]any), "resourceVersion")
	obj["spec"].(map[string]any)["replicas"] = json.Number(fmt.Sprint(replicas))
	_, err = r.client.Update(ctx, cachetest.Key("default", name), obj)
	require.NoError(r.t, err)
}

type status struct {
	Phase              string
	Ready, Replicas    int64
	ObservedGeneration int64
	Generation         int64
	Conditions         map[string]string
	Transitions        map[string]string
}

func (r *rig) status(name string) status {
	r.t.Helper()
	o, err := r.store.Get(ctx, cachetest.Key("default", name))
	require.NoError(r.t, err)
	obj := cachetest.Decode(r.t, o)
	st, _ := obj["status"].(map[string]any)
	num := func(v any) int64 { n, _ := v.(json.Number).Int64(); return n }
	out := status{Generation: o.Generation(), Conditions: map[string]string{}, Transitions: map[string]string{}}
	if st == nil {
		return out
	}
	out.Phase, _ = st["phase"].(string)
	if v, ok := st["readyReplicas"]; ok {
		out.Ready = num(v)
	}
	if v, ok := st["replicas"]; ok {
		out.Replicas = num(v)
	}
	if v, ok := st["observedGeneration"]; ok {
		out.ObservedGeneration = num(v)
	}
	conds, _ := st["conditions"].([]any)
	for _, c := range conds {
		m := c.(map[string]any)
		out.Conditions[m["type"].(string)] = m["status"].(string)
		out.Transitions[m["type"].(string)], _ = m["lastTransitionTime"].(string)
	}
	return out
}

// TestRolloutIsPacedByRolloutStep follows one Application through create, scale up, scale to
// zero and delete, one virtual second per step.
func TestRolloutIsPacedByRolloutStep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, time.Second)
		defer r.stop()
		r.create("web", 3, nil)
		synctest.Wait()
		st := r.status("web")
		assert.Equal(t, "Pending", st.Phase)
		assert.Equal(t, int64(0), st.Ready)
		assert.Equal(t, int64(3), st.Replicas)
		assert.Equal(t, int64(1), st.ObservedGeneration)
		assert.Equal(t, "True", st.Conditions["Progressing"])
		readySince := st.Transitions["Ready"]

		for want := int64(1); want <= 2; want++ {
			time.Sleep(time.Second)
			synctest.Wait()
			st = r.status("web")
			assert.Equal(t, want, st.Ready, "one step per second")
			assert.Equal(t, "Pending", st.Phase)
			assert.Equal(t, readySince, st.Transitions["Ready"], "lastTransitionTime moves only when the status changes")
		}
		time.Sleep(time.Second)
		synctest.Wait()
		st = r.status("web")
		assert.Equal(t, int64(3), st.Ready)
		assert.Equal(t, "Running", st.Phase)
		assert.Equal(t, "True", st.Conditions["Ready"])
		assert.Equal(t, "False", st.Conditions["Progressing"])
		assert.Equal(t, st.Generation, st.ObservedGeneration)

		// Scale to 5: acknowledged at once, ready in one step of ceil(5/4)=2.
		r.scale("web", 5)
		synctest.Wait()
		st = r.status("web")
		assert.Equal(t, int64(2), st.ObservedGeneration)
		assert.Equal(t, "True", st.Conditions["Progressing"])
		assert.Equal(t, int64(3), st.Ready)
		time.Sleep(time.Second)
		synctest.Wait()
		st = r.status("web")
		assert.Equal(t, int64(5), st.Ready)
		assert.Equal(t, "Running", st.Phase)

		// Scale to 0: steps of 2 (5 → 3 → 1 → 0), then Succeeded.
		r.scale("web", 0)
		synctest.Wait()
		var seen []int64
		for range 3 {
			time.Sleep(time.Second)
			synctest.Wait()
			seen = append(seen, r.status("web").Ready)
		}
		assert.Equal(t, []int64{3, 1, 0}, seen)
		assert.Equal(t, "Succeeded", r.status("web").Phase)

		// Delete: cleanup, then the finalizer goes and so does the object.
		_, _, err := r.client.Delete(ctx, cachetest.Key("default", "web"), cache.Preconditions{})
		require.NoError(t, err)
		synctest.Wait()
		_, err = r.store.Get(ctx, cachetest.Key("default", "web"))
		require.ErrorIs(t, err, cache.ErrNotFound)
		reasons := r.events.reasons("web")
		assert.Subset(t, reasons, []string{"FinalizerAdded", "Reconciling", "ScalingReplicas", "Ready", "Cleanup", "FinalizerRemoved"})
	})
}

func TestInstantRollout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0)
		defer r.stop()
		r.create("fast", 4, nil)
		synctest.Wait()
		st := r.status("fast")
		assert.Equal(t, "Running", st.Phase)
		assert.Equal(t, int64(4), st.Ready)
	})
}

func attemptStarts(t *testing.T, r *rig, name string) ([]time.Time, []application.Attempt) {
	t.Helper()
	h := r.app.History(cachetest.Key("default", name))
	var starts []time.Time
	for _, a := range h {
		ts, err := time.Parse("2006-01-02T15:04:05.000Z07:00", a.StartTime)
		require.NoError(t, err)
		starts = append(starts, ts)
	}
	return starts, h
}

// TestSimulatedFailuresBackOff: "3" fails three attempts 1, 2 and 4 s apart, then succeeds.
func TestSimulatedFailuresBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0)
		defer r.stop()
		r.create("flaky", 1, map[string]any{application.SimulateFailuresAnnotation: "3"})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		starts, h := attemptStarts(t, r, "flaky")
		require.GreaterOrEqual(t, len(h), 4, "history: %+v", h)
		for i := range 3 {
			assert.False(t, h[i].Success)
		}
		assert.True(t, h[3].Success)
		assert.Equal(t, time.Second, starts[1].Sub(starts[0]))
		assert.Equal(t, 2*time.Second, starts[2].Sub(starts[1]))
		assert.Equal(t, 4*time.Second, starts[3].Sub(starts[2]))
		assert.Equal(t, "Running", r.status("flaky").Phase)
		assert.Equal(t, "True", r.status("flaky").Conditions["Ready"])
		ev, ok := r.events.find("ReconcileError")
		require.True(t, ok)
		assert.Equal(t, events.Error, ev.Severity)
		assert.Equal(t, events.TypeWarning, ev.Type)
	})
}

// TestAlwaysFailingIsDropped: six failed attempts (waits 1, 2, 4, 8, 16 s), then Failed, a
// Critical event, and no further attempt until the spec changes.
func TestAlwaysFailingIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0)
		defer r.stop()
		r.create("broken", 1, map[string]any{application.SimulateFailuresAnnotation: "always"})
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		starts, h := attemptStarts(t, r, "broken")
		require.Len(t, h, 6, "history: %+v", h)
		var gaps []time.Duration
		for i := 1; i < len(starts); i++ {
			gaps = append(gaps, starts[i].Sub(starts[i-1]))
		}
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}, gaps)
		assert.Equal(t, "Failed", r.status("broken").Phase)
		ev, ok := r.events.find("ReconcileFailed")
		require.True(t, ok)
		assert.Equal(t, events.Critical, ev.Severity)

		assert.Equal(t, 6.0, metricValue(t, r.metrics, "controller_reconcile_errors_total"))
		assert.Equal(t, 5.0, metricValue(t, r.metrics, "workqueue_retries_total"))
		assert.Equal(t, 0.0, metricValue(t, r.metrics, "workqueue_depth"))
		assert.GreaterOrEqual(t, metricValue(t, r.metrics, "workqueue_adds_total"), 6.0)
		assert.Equal(t, 6.0, metricValue(t, r.metrics, "controller_reconcile_duration_seconds"))

		r.scale("broken", 2)
		synctest.Wait()
		_, h = attemptStarts(t, r, "broken")
		assert.Len(t, h, 7, "a spec change brings it back")
	})
}

// TestBurstOfUpdatesCollapses: 1,000 updates as fast as one client can send them cause at most
// 100 reconciles, and the final status matches the last spec. Passes cut short by a conflict
// (the client's update won the race with the controller's status write) are not counted: how
// many happen depends on how the two goroutines interleave on the CPU, not on the queue.
func TestBurstOfUpdatesCollapses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, time.Second)
		defer r.stop()
		r.create("busy", 1, nil)
		for i := range 1000 {
			r.scale("busy", i%100+1)
		}
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		st := r.status("busy")
		assert.Equal(t, int64(100), st.Replicas)
		assert.Equal(t, int64(100), st.Ready)
		assert.Equal(t, st.Generation, st.ObservedGeneration)
		assert.Equal(t, "Running", st.Phase)
		done := metricValue(t, r.metrics, "controller_reconcile_total", func(result string) bool { return result != "conflict" })
		assert.LessOrEqual(t, done, 100.0)
		assert.Greater(t, done, 0.0)
	})
}

// TestStatusWritesDoNotRequeue: after the rollout settles no reconcile happens by itself.
func TestStatusWritesDoNotRequeue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0)
		defer r.stop()
		r.create("quiet", 2, nil)
		time.Sleep(time.Second)
		synctest.Wait()
		_, before := attemptStarts(t, r, "quiet")
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		_, after := attemptStarts(t, r, "quiet")
		assert.Equal(t, len(before), len(after))
	})
}

// TestEveryPassIsRecorded: a reconcile asked for by hand on a converged Application, or before
// the next rollout step is due, does nothing and writes nothing, and its history says so.
func TestEveryPassIsRecorded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, time.Second)
		defer r.stop()
		key := cachetest.Key("default", "web")
		r.create("web", 2, nil)
		synctest.Wait()
		require.Equal(t, "Pending", r.status("web").Phase)

		// Mid-rollout, before the next step is due.
		_, before := attemptStarts(t, r, "web")
		obj, err := r.store.Get(ctx, key)
		require.NoError(t, err)
		require.True(t, r.ctrl.Enqueue(key))
		synctest.Wait()
		_, after := attemptStarts(t, r, "web")
		require.Len(t, after, len(before)+1)
		last := after[len(after)-1]
		assert.True(t, last.Success)
		assert.Equal(t, "nothing to do yet: the next rollout step is due in 1s", last.Message)
		again, err := r.store.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, obj.ResourceVersion(), again.ResourceVersion(), "an early pass writes nothing")

		// Converged.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		require.Equal(t, "Running", r.status("web").Phase)
		_, before = attemptStarts(t, r, "web")
		obj, err = r.store.Get(ctx, key)
		require.NoError(t, err)
		require.True(t, r.ctrl.Enqueue(key))
		synctest.Wait()
		_, after = attemptStarts(t, r, "web")
		require.Len(t, after, len(before)+1)
		last = after[len(after)-1]
		assert.Equal(t, application.Attempt{Generation: 1, Success: true, Phase: "Running", Message: "nothing to do",
			StartTime: last.StartTime, Duration: last.Duration, ResourceVersion: fmt.Sprint(obj.ResourceVersion())}, last)
		again, err = r.store.Get(ctx, key)
		require.NoError(t, err)
		assert.Equal(t, obj.ResourceVersion(), again.ResourceVersion(), "a pass with nothing to do writes nothing")
	})
}

// metricValue sums every sample of the metric name (histograms: their counts), or only those
// whose result label keep accepts when keep is given.
func metricValue(t *testing.T, reg *metrics.Registry, name string, keep ...func(result string) bool) float64 {
	t.Helper()
	mfs, err := reg.Gatherer().Gather()
	require.NoError(t, err)
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(keep) > 0 && !keep[0](resultLabel(m)) {
				continue
			}
			switch {
			case m.Counter != nil:
				total += m.GetCounter().GetValue()
			case m.Gauge != nil:
				total += m.GetGauge().GetValue()
			case m.Histogram != nil:
				total += float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return total
}

func resultLabel(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == "result" {
			return l.GetValue()
		}
	}
	return ""
}

// TestResyncLeavesRetriesAndGivingUpAlone runs both simulated failures with the default
// 30 s resync: "3" still fails three attempts exactly 1, 2 and 4 s apart (a resync inside a
// backoff does not cut it short), and "always" gives up once, after six attempts, and stays
// Failed through every later resync until its annotations change (SPEC §8).
func TestResyncLeavesRetriesAndGivingUpAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0, func(c *reconciler.Config) { c.ResyncInterval = 30 * time.Second })
		defer r.stop()
		time.Sleep(29 * time.Second) // the first resync comes 1 s after the create: inside the first backoff
		r.create("flaky", 1, map[string]any{application.SimulateFailuresAnnotation: "3"})
		r.create("broken", 1, map[string]any{application.SimulateFailuresAnnotation: "always"})
		time.Sleep(5 * time.Minute) // ten resyncs
		synctest.Wait()

		starts, h := attemptStarts(t, r, "flaky")
		require.GreaterOrEqual(t, len(h), 4, "history: %+v", h)
		assert.Equal(t, []bool{false, false, false, true}, []bool{h[0].Success, h[1].Success, h[2].Success, h[3].Success})
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second},
			[]time.Duration{starts[1].Sub(starts[0]), starts[2].Sub(starts[1]), starts[3].Sub(starts[2])})
		assert.Equal(t, "Running", r.status("flaky").Phase)

		starts, h = attemptStarts(t, r, "broken")
		require.Len(t, h, 6, "six attempts, then no more (history: %+v)", h)
		var gaps []time.Duration
		for i := 1; i < len(starts); i++ {
			gaps = append(gaps, starts[i].Sub(starts[i-1]))
		}
		assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second}, gaps)
		assert.Equal(t, "Failed", r.status("broken").Phase)
		gaveUp := 0
		for _, reason := range r.events.reasons("broken") {
			if reason == "ReconcileFailed" {
				gaveUp++
			}
		}
		assert.Equal(t, 1, gaveUp, "one Critical ReconcileFailed Event: it gave up once")

		// Changing the annotation starts a new count: the next attempts succeed.
		o, err := r.store.Get(ctx, cachetest.Key("default", "broken"))
		require.NoError(t, err)
		obj := cachetest.Decode(t, o)
		delete(obj["metadata"].(map[string]any), "resourceVersion")
		obj["metadata"].(map[string]any)["annotations"] = map[string]any{application.SimulateFailuresAnnotation: "1"}
		_, err = r.client.Update(ctx, cachetest.Key("default", "broken"), obj)
		require.NoError(t, err)
		time.Sleep(time.Minute)
		synctest.Wait()
		assert.Equal(t, "Running", r.status("broken").Phase)
	})
}

// TestHistorySaysWhatEachPassReadAndWrote: each attempt names the version it read and the
// writes it made with the versions they produced (the watch events that carry them), and the
// requeue it asked for.
func TestHistorySaysWhatEachPassReadAndWrote(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, time.Second)
		defer r.stop()
		w, err := r.store.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}})
		require.NoError(t, err)
		defer w.Stop()
		r.create("web", 2, nil)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		_, h := attemptStarts(t, r, "web")
		require.GreaterOrEqual(t, len(h), 3, "history: %+v", h)

		// The watch events, by version: what a watcher (the dashboard) sees of each write.
		seen := map[string]*cache.Object{}
	drain:
		for {
			select {
			case ev := <-w.Events():
				seen[fmt.Sprint(ev.Object.ResourceVersion())] = ev.Object
			default:
				break drain
			}
		}
		first := h[0]
		require.Len(t, first.Wrote, 2, "the finalizer, then the status: %+v", first)
		assert.Equal(t, "metadata.finalizers", first.Wrote[0].What)
		assert.Equal(t, "status", first.Wrote[1].What)
		assert.Equal(t, "1s", first.RequeueAfter, "the next rollout step")
		fin := seen[first.Wrote[0].ResourceVersion]
		require.NotNil(t, fin, "the finalizer write is a watch event")
		assert.Contains(t, fin.Finalizers(), application.Finalizer)
		st := seen[first.Wrote[1].ResourceVersion]
		require.NotNil(t, st, "the status write is a watch event")
		assert.Equal(t, "Pending", st.Field("status.phase"))
		assert.Equal(t, first.Wrote[1].ResourceVersion, h[1].ResourceVersion, "the next pass read what the first wrote")
		// The finalizer's watch event may queue the key again while the first pass runs: a pass
		// then finds the rollout step not yet due and writes nothing. The next step writes status.
		next := 1
		for ; next < len(h) && len(h[next].Wrote) == 0; next++ {
			assert.Equal(t, first.Wrote[1].ResourceVersion, h[next].ResourceVersion, "pass %d read what the first wrote", next)
			assert.Equal(t, "1s", h[next].RequeueAfter, "pass %d waits for the step", next)
		}
		require.Less(t, next, len(h), "%+v", h)
		require.Len(t, h[next].Wrote, 1, "%+v", h)
		assert.Equal(t, "status", h[next].Wrote[0].What)
		last := h[len(h)-1]
		assert.Equal(t, "Running", last.Phase)
		assert.Empty(t, last.RequeueAfter, "done: no requeue")
	})
}

// TestStoredObjectsAsGolden pins what the controller's writes store, managedFields included,
// as testdata/*.golden (uid masked): an Application rolled out to Running (the finalizer's
// update, then the status write), and, deleted while another finalizer holds it, cleaned up
// (a status write, then the update that removes the controller's finalizer).
func TestStoredObjectsAsGolden(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t, 0)
		defer r.stop()
		key := cachetest.Key("default", "golden")
		r.create("golden", 3, nil)
		synctest.Wait()
		r.golden(t, key, "reconciled-ready")

		o, err := r.store.Get(ctx, key)
		require.NoError(t, err)
		obj := cachetest.Decode(t, o)
		md := obj["metadata"].(map[string]any)
		md["finalizers"] = append(md["finalizers"].([]any), "example.com/keep")
		_, err = r.client.Update(ctx, key, obj)
		require.NoError(t, err)
		synctest.Wait()
		_, _, err = r.client.Delete(ctx, key, cache.Preconditions{})
		require.NoError(t, err)
		synctest.Wait()
		r.golden(t, key, "reconciled-cleanup")
	})
}

// golden compares the object at key, its uid masked, with testdata/name.golden.
func (r *rig) golden(t *testing.T, key cache.Key, name string) {
	t.Helper()
	o, err := r.store.Get(ctx, key)
	require.NoError(t, err)
	obj := cachetest.Decode(t, o)
	obj["metadata"].(map[string]any)["uid"] = "UID"
	got, err := json.MarshalIndent(obj, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, append(got, '\n'), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.JSONEq(t, string(want), string(got))
}
