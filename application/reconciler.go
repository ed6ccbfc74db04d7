package application

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	"k8s.io/utils/clock"
)

// Names the Application reconciler uses on objects.
const (
	apiVersion = "cloudnative.elide.dev/v1"
	kind       = "Application"

	Finalizer                  = "cloudnative.elide.dev/finalizer"
	SimulateFailuresAnnotation = "cloudnative.elide.dev/simulate-failures"
	// Source is the component name on the controller's Events.
	Source = "application-controller"
)

// EventRecorder records Events (*events.Recorder implements it).
type EventRecorder interface {
	Record(ctx context.Context, ev events.Event)
}

// Client is how the reconciler reads and writes Applications: the in-process API client
// (registry.Client), so its writes pass the same validation as a client's.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
}

// Config configures the Application reconciler. Client is required.
type Config struct {
	Client Client
	// Events may be nil.
	Events EventRecorder
	// RolloutStep is the time between readiness steps; zero rolls out at once.
	RolloutStep time.Duration
	// Clock stamps conditions and paces the rollout. Nil means the real clock.
	Clock clock.PassiveClock
}

// Reconciler reconciles Applications (SPEC §8): finalizer, cleanup on deletion, a simulated
// rollout paced by RolloutStep, phases and conditions, and simulated failures.
type Reconciler struct {
	cfg     Config
	history history

	// mu guards next and failures: in-memory state per object, like a real controller's.
	mu       sync.Mutex
	next     map[cache.Key]time.Time // when the next rollout step is due
	delta    map[cache.Key]int64     // the step size of the current rollout
	failures map[failKey]int         // simulated failures spent, per uid and annotation value
}

type failKey struct{ uid, value string }

var (
	_ reconciler.Reconciler = (*Reconciler)(nil)
	_ reconciler.Scheduler  = (*Reconciler)(nil)
	_ reconciler.Dropper    = (*Reconciler)(nil)
)

// New returns the Application reconciler.
func New(cfg Config) *Reconciler {
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	return &Reconciler{cfg: cfg, next: map[cache.Key]time.Time{}, delta: map[cache.Key]int64{}, failures: map[failKey]int{}}
}

// NotBefore is when the next rollout step of key is due (zero: now).
func (a *Reconciler) NotBefore(key cache.Key) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.next[key]
}

// History returns the last reconciles of key, oldest first.
func (a *Reconciler) History(key cache.Key) []Attempt { return a.history.Get(key) }

// pass is what one reconcile did, for the history. Every pass is recorded, one that found
// nothing to do too (it says so), so a reconcile asked for by hand always leaves a trace.
type pass struct {
	res     reconciler.Result
	phase   string
	message string
}

// Reconcile does the next due step for the Application at key (level-based).
func (a *Reconciler) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	start := a.cfg.Clock.Now()
	obj, err := a.cfg.Client.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		a.forget(key, "")
		a.history.Forget(key)
		return reconciler.Result{}, nil
	}
	if err != nil {
		return reconciler.Result{}, err
	}
	var wrote []Write
	p, err := a.reconcile(ctx, key, obj, start, &wrote)
	msg := p.message
	if err != nil {
		msg = err.Error()
	}
	at := Attempt{
		Generation: obj.Generation(), Success: err == nil, Phase: p.phase, Message: msg,
		StartTime: reconciler.FormatStart(start), Duration: a.cfg.Clock.Now().Sub(start).String(),
		ResourceVersion: strconv.FormatUint(obj.ResourceVersion(), 10), Wrote: wrote,
	}
	if err == nil && p.res.RequeueAfter > 0 {
		at.RequeueAfter = p.res.RequeueAfter.String()
	}
	a.history.Add(key, at)
	return p.res, err
}

// reconcile does the pass; each write it makes is appended to wrote.
//
// Ownership: obj is the store's, immutable and shared with every reader and watcher (the
// controller's informer holds the same objects); the pass reads it through its accessors and
// decodes it once (app), a private tree it owns. What the pass needs of app (status, spec) is
// read before any write; app is then only the body of the one metadata write a pass may make
// (the finalizer's), after which the pass does not use it again. A status write needs no
// copy of it: its body is built from the status alone (statusBody). Results of writes are
// used through their accessors (their version, for the next write's precondition), never
// decoded again.
func (a *Reconciler) reconcile(ctx context.Context, key cache.Key, obj *cache.Object, now time.Time, wrote *[]Write) (pass, error) {
	app, err := obj.Decode()
	if err != nil {
		return pass{}, reconciler.TerminalError(err)
	}
	st := statusOf(app)
	if obj.Deleting() {
		return a.cleanup(ctx, key, obj, app, st, wrote)
	}
	if p, err, failed := a.simulateFailure(ctx, key, obj, st, now, wrote); failed {
		return p, err
	}
	spec, _ := app["spec"].(map[string]any)
	desired := int64Of(spec["replicas"])
	if !slices.Contains(obj.Finalizers(), Finalizer) {
		metadataOf(app)["finalizers"] = append(toAny(obj.Finalizers()), Finalizer)
		if obj, err = a.update(ctx, key, obj, app, "metadata.finalizers", wrote); err != nil {
			return pass{phase: st.Phase}, err
		}
		// The write changed metadata only: st and desired hold for the object it stored.
		a.record(ctx, obj, events.TypeNormal, events.Info, "FinalizerAdded", "Added finalizer "+Finalizer)
	}
	return a.rollout(ctx, key, obj, desired, st, now, wrote)
}

// rollout acknowledges a new generation and moves readyReplicas one step when a step is due.
// desired is spec.replicas of obj.
func (a *Reconciler) rollout(ctx context.Context, key cache.Key, obj *cache.Object, desired int64, st appStatus, now time.Time, wrote *[]Write) (pass, error) {
	step := a.cfg.RolloutStep
	if due := a.NotBefore(key); now.Before(due) {
		wait := due.Sub(now)
		return pass{res: reconciler.Result{RequeueAfter: wait}, phase: st.Phase,
			message: fmt.Sprintf("nothing to do yet: the next rollout step is due in %v", wait.Round(time.Millisecond))}, nil
	}
	gen := obj.Generation()
	ts := now.UTC().Format(time.RFC3339)
	changed := false
	message := "nothing to do"
	var later time.Time

	if st.ObservedGeneration != gen {
		if st.Phase == "" {
			st.Phase = "Pending"
			st.setCondition("Ready", "False", "RolloutInProgress", "Replicas are being rolled out", gen, ts)
		}
		// The step size is fixed for the rollout: ceil(max(old, new)/4), at least 1.
		a.mu.Lock()
		a.delta[key] = max((max(st.ReadyReplicas, desired)+3)/4, 1)
		a.mu.Unlock()
		st.ObservedGeneration, st.Replicas = gen, desired
		st.setCondition("Progressing", "True", "NewGeneration", fmt.Sprintf("Rolling out generation %d with %d replicas", gen, desired), gen, ts)
		message = fmt.Sprintf("observed generation %d", gen)
		a.record(ctx, obj, events.TypeNormal, events.Info, "Reconciling", fmt.Sprintf("Rolling out generation %d with %d replicas", gen, desired))
		changed = true
		if step > 0 && st.ReadyReplicas != desired {
			later = now.Add(step)
		}
	}
	if later.IsZero() && st.ReadyReplicas != desired {
		from := st.ReadyReplicas
		if step == 0 {
			st.ReadyReplicas = desired
		} else {
			a.mu.Lock()
			delta, ok := a.delta[key]
			a.mu.Unlock()
			if !ok {
				delta = max((max(from, desired)+3)/4, 1)
			}
			if from < desired {
				st.ReadyReplicas = min(from+delta, desired)
			} else {
				st.ReadyReplicas = max(from-delta, desired)
			}
			if st.ReadyReplicas != desired {
				later = now.Add(step)
			}
		}
		message = fmt.Sprintf("ready replicas %d -> %d of %d", from, st.ReadyReplicas, desired)
		a.record(ctx, obj, events.TypeNormal, events.Info, "ScalingReplicas", fmt.Sprintf("Ready replicas %d -> %d (desired %d)", from, st.ReadyReplicas, desired))
		changed = true
	}
	if st.ReadyReplicas == desired && later.IsZero() {
		phase := "Running"
		if desired == 0 {
			phase = "Succeeded"
		}
		ready := st.condition("Ready")
		progressing := st.condition("Progressing")
		if st.Phase != phase || ready == nil || ready.Status != "True" || progressing == nil || progressing.Status != "False" {
			st.Phase = phase
			st.setCondition("Ready", "True", "ReconciliationSucceeded", "All replicas are ready", gen, ts)
			st.setCondition("Progressing", "False", "NewReplicaSetAvailable", fmt.Sprintf("Generation %d is fully rolled out", gen), gen, ts)
			message = fmt.Sprintf("%s with %d/%d replicas ready", phase, desired, desired)
			a.record(ctx, obj, events.TypeNormal, events.Info, "Ready", fmt.Sprintf("All %d replicas are ready", desired))
			changed = true
		}
	}
	a.mu.Lock()
	if later.IsZero() {
		delete(a.next, key)
		delete(a.delta, key)
	} else {
		a.next[key] = later
	}
	a.mu.Unlock()
	if changed {
		if _, err := a.writeStatus(ctx, key, obj, st, wrote); err != nil {
			return pass{phase: st.Phase}, err
		}
	}
	p := pass{phase: st.Phase, message: message}
	if !later.IsZero() {
		p.res.RequeueAfter = later.Sub(now)
	}
	return p, nil
}

// simulateFailure fails this attempt when the simulate-failures annotation says so.
func (a *Reconciler) simulateFailure(ctx context.Context, key cache.Key, obj *cache.Object, st appStatus, now time.Time, wrote *[]Write) (pass, error, bool) {
	v := obj.Annotation(SimulateFailuresAnnotation)
	if v == "" {
		return pass{}, nil, false
	}
	n, err := strconv.Atoi(v)
	always := v == "always"
	if !always && (err != nil || n <= 0) {
		return pass{}, nil, false
	}
	fk := failKey{obj.UID(), v}
	a.mu.Lock()
	spent := a.failures[fk]
	fail := always || spent < n
	if fail {
		a.failures[fk] = spent + 1
	}
	a.mu.Unlock()
	if !fail {
		return pass{}, nil, false
	}
	of := v
	if always {
		of = "always"
	}
	msg := fmt.Sprintf("simulated failure %d of %s", spent+1, of)
	st.setCondition("Ready", "False", "ReconciliationFailed", msg, obj.Generation(), now.UTC().Format(time.RFC3339))
	if _, err := a.writeStatus(ctx, key, obj, st, wrote); err != nil {
		return pass{phase: st.Phase}, err, true
	}
	a.record(ctx, obj, events.TypeWarning, events.Error, "ReconcileError", msg)
	return pass{phase: st.Phase}, errors.New(msg), true
}

// cleanup runs when the object is being deleted: readyReplicas to 0, then the finalizer goes.
// It never fails on purpose (simulated failures do not apply). app is the pass's decoded obj,
// the body of the finalizer's removal (a status write before it changes neither spec nor the
// metadata the body carries).
func (a *Reconciler) cleanup(ctx context.Context, key cache.Key, obj *cache.Object, app map[string]any, st appStatus, wrote *[]Write) (pass, error) {
	if !slices.Contains(obj.Finalizers(), Finalizer) {
		return pass{phase: st.Phase, message: "nothing to do: being deleted, and our finalizer is already removed"}, nil
	}
	var err error
	if st.ReadyReplicas != 0 {
		from := st.ReadyReplicas
		st.ReadyReplicas = 0
		if obj, err = a.writeStatus(ctx, key, obj, st, wrote); err != nil {
			return pass{phase: st.Phase}, err
		}
		a.record(ctx, obj, events.TypeNormal, events.Info, "Cleanup", fmt.Sprintf("Scaled %d ready replicas down to 0", from))
	} else {
		a.record(ctx, obj, events.TypeNormal, events.Info, "Cleanup", "Nothing left to clean up")
	}
	metadataOf(app)["finalizers"] = toAny(slices.DeleteFunc(slices.Clone(obj.Finalizers()), func(f string) bool { return f == Finalizer }))
	if _, err := a.update(ctx, key, obj, app, "metadata.finalizers", wrote); err != nil {
		return pass{phase: st.Phase}, err
	}
	a.record(ctx, obj, events.TypeNormal, events.Info, "FinalizerRemoved", "Removed finalizer "+Finalizer)
	a.forget(key, obj.UID())
	return pass{phase: st.Phase, message: "cleanup complete"}, nil
}

// Dropped marks the Application Failed once its key is dropped after the last retry.
func (a *Reconciler) Dropped(ctx context.Context, key cache.Key, cause error) {
	obj, err := a.cfg.Client.Get(ctx, key)
	if err != nil {
		return
	}
	app, err := obj.Decode()
	if err != nil {
		return
	}
	st := statusOf(app)
	st.Phase = "Failed"
	msg := fmt.Sprintf("Giving up after repeated failures: %v", cause)
	st.setCondition("Ready", "False", "ReconciliationFailed", msg, obj.Generation(), a.cfg.Clock.Now().UTC().Format(time.RFC3339))
	if _, err := a.writeStatus(ctx, key, obj, st, nil); err != nil && !errors.Is(err, cache.ErrNotFound) {
		return
	}
	a.record(ctx, obj, events.TypeWarning, events.Critical, "ReconcileFailed", msg)
}

// writeStatus stores st as obj's status through the status subresource, conditional on obj's
// uid and resourceVersion; only status changes, so generation never moves. The write is
// appended to wrote (when not nil).
func (a *Reconciler) writeStatus(ctx context.Context, key cache.Key, obj *cache.Object, st appStatus, wrote *[]Write) (*cache.Object, error) {
	out, err := a.cfg.Client.UpdateStatus(ctx, key, statusBody(obj, st))
	noteWrite(wrote, "status", out, err)
	return out, err
}

// statusBody is the body of a write of st to obj's status subresource: the Application's
// type, the metadata that names obj and its preconditions (uid, resourceVersion), and the
// status. The status subresource of a custom resource takes the status alone from the body
// and keeps everything else as stored (managedFields too, when the body has none), so the
// rest of the object need not be sent, nor copied to be sent.
func statusBody(obj *cache.Object, st appStatus) map[string]any {
	k := obj.Key()
	return map[string]any{
		"apiVersion": apiVersion, "kind": kind,
		"metadata": map[string]any{"name": k.Name, "namespace": k.Namespace, "uid": obj.UID(),
			"resourceVersion": strconv.FormatUint(obj.ResourceVersion(), 10)},
		"status": st.toMap(),
	}
}

// update stores app, the pass's decoded obj with its metadata changed (what changes is named
// by what), conditional on obj's resourceVersion, and appends the write to wrote. app's
// managedFields are dropped: the server owns them, and an update without them keeps the
// stored ones (as one that sends them back unchanged does), while ones decoded before an
// earlier write of the pass would be stale. app is the write path's from then on.
func (a *Reconciler) update(ctx context.Context, key cache.Key, obj *cache.Object, app map[string]any, what string, wrote *[]Write) (*cache.Object, error) {
	md := metadataOf(app)
	md["resourceVersion"] = strconv.FormatUint(obj.ResourceVersion(), 10)
	delete(md, "managedFields")
	out, err := a.cfg.Client.Update(ctx, key, app)
	noteWrite(wrote, what, out, err)
	return out, err
}

// metadataOf is app["metadata"], created when missing (the store never keeps an object
// without it).
func metadataOf(app map[string]any) map[string]any {
	md, ok := app["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		app["metadata"] = md
	}
	return md
}

// noteWrite appends a successful write to wrote.
func noteWrite(wrote *[]Write, what string, out *cache.Object, err error) {
	if wrote != nil && err == nil && out != nil {
		*wrote = append(*wrote, Write{What: what, ResourceVersion: strconv.FormatUint(out.ResourceVersion(), 10)})
	}
}

func (a *Reconciler) record(ctx context.Context, obj *cache.Object, typ string, sev events.Severity, reason, msg string) {
	if a.cfg.Events == nil {
		return
	}
	k := obj.Key()
	a.cfg.Events.Record(ctx, events.Event{
		Object: events.Ref{APIVersion: apiVersion, Kind: kind, Namespace: k.Namespace, Name: k.Name,
			UID: obj.UID(), ResourceVersion: strconv.FormatUint(obj.ResourceVersion(), 10)},
		Type: typ, Severity: sev, Reason: reason, Message: msg, Source: Source,
	})
}

// forget drops the in-memory state of key (and of uid's failure counts when uid is set).
func (a *Reconciler) forget(key cache.Key, uid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.next, key)
	delete(a.delta, key)
	if uid != "" {
		for fk := range a.failures {
			if fk.uid == uid {
				delete(a.failures, fk)
			}
		}
	}
}

func toAny(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// ForgetSchedules forgets when each object's next rollout step is due (and its step size),
// for a clock that was set back (a snapshot restored with its time): the next pass of each
// object takes its step at once and schedules the next on the clock as it now reads.
func (a *Reconciler) ForgetSchedules() {
	a.mu.Lock()
	defer a.mu.Unlock()
	clear(a.next)
	clear(a.delta)
}
