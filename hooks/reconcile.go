package hooks

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/reconciler"
)

// The reconcile hook protocol (SPEC §15). For each object opemu POSTs a hookRequest to the
// hook's URL and applies the hookAnswer: children first (so a status can say they exist), then
// the hook's events, then its status (only when it changed), then the finalizer.

// maxAnswerBytes bounds a hook's answer.
const maxAnswerBytes = 3 << 20

// maxEvents bounds the events of one answer.
const maxEvents = 20

// hookRequest is what a hook is sent.
type hookRequest struct {
	// Controller names the Controller object calling.
	Controller string `json:"controller"`
	// Object is the object to reconcile, in the Controller's version.
	Object map[string]any `json:"object"`
	// Children are the object's children of the kinds the Controller lists, by "Kind.apiVersion"
	// (e.g. "ConfigMap.v1"), then by name ("namespace/name" for namespaced children of a
	// cluster-scoped object). Every listed kind is present, empty when there are none.
	Children map[string]map[string]any `json:"children"`
	// Attempt is 1, plus the failures since the object's last successful reconcile.
	Attempt int `json:"attempt"`
	// Finalizing says the object is being deleted and waits for the hook to answer finalized.
	Finalizing bool `json:"finalizing"`
}

// hookAnswer is what a hook answers. Unknown fields are refused, so a misspelt field is an
// error the author sees, not a silent no-op.
type hookAnswer struct {
	// Status, when set, replaces the object's status (opemu keeps its Synced condition in it).
	Status map[string]any `json:"status"`
	// Children, when set (even empty), are every child the object should have: missing ones are
	// created, changed ones updated, others of the listed kinds deleted. Absent (null) leaves
	// the children as they are.
	Children []map[string]any `json:"children"`
	// RequeueAfterSeconds, when positive, reconciles the object again after this long.
	RequeueAfterSeconds *float64 `json:"requeueAfterSeconds"`
	// Events are recorded on the object.
	Events []hookEvent `json:"events"`
	// Finalized, while finalizing, lets the object go: opemu removes its finalizer.
	Finalized bool `json:"finalized"`
}

type hookEvent struct {
	Type    string `json:"type"`
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// hookReconciler reconciles the objects of one Controller by calling its hook. Its spec is
// swapped when the Controller changes; every reconcile reads the spec of the moment.
type hookReconciler struct {
	m      *Manager
	name   string
	client Client
	spec   atomic.Pointer[controllerSpec]

	history history
	// mu guards failures and phases.
	mu sync.Mutex
	// failures are the consecutive failed reconciles per object, for attempt.
	failures map[cache.Key]int
	// phases are the objects' status.phase after their last reconcile (resource_phase_count:
	// a hooked kind's phase is not an indexed field, as the Application's is).
	phases map[cache.Key]string
}

var (
	_ reconciler.Reconciler = (*hookReconciler)(nil)
	_ reconciler.Dropper    = (*hookReconciler)(nil)
)

// pass is what one reconcile did, for the history.
type pass struct {
	res     reconciler.Result
	phase   string
	message string
}

// Reconcile calls the hook for the object at key and applies its answer (level-based: the
// object is read afresh).
func (r *hookReconciler) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	start := r.m.cfg.Clock.Now()
	sp := r.spec.Load()
	obj, err := r.client.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		r.forget(key)
		return reconciler.Result{}, nil
	}
	if err != nil {
		return reconciler.Result{}, err
	}
	attempt := r.attempt(key)
	p, err := r.reconcile(ctx, sp, key, obj, attempt)
	if err != nil && ctx.Err() != nil {
		return p.res, err // stopped (shutdown, lost leadership, a changed Controller): not a failure
	}
	msg := p.message
	if err != nil {
		msg = err.Error()
		if !reconciler.IsConflict(err) {
			r.mu.Lock()
			r.failures[key]++
			r.mu.Unlock()
		}
	} else {
		r.mu.Lock()
		delete(r.failures, key)
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.phases[key] = p.phase
	r.mu.Unlock()
	r.history.Add(key, Attempt{
		Controller: r.name, Generation: obj.Generation(), Success: err == nil, Attempt: attempt, Phase: p.phase, Message: msg,
		StartTime: reconciler.FormatStart(start), Duration: r.m.cfg.Clock.Now().Sub(start).String(),
	})
	return p.res, err
}

func (r *hookReconciler) attempt(key cache.Key) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failures[key] + 1
}

// forget drops what is kept about an object that is gone.
func (r *hookReconciler) forget(key cache.Key) {
	r.mu.Lock()
	delete(r.failures, key)
	delete(r.phases, key)
	r.mu.Unlock()
	r.history.Forget(key)
}

// phaseCounts returns how many objects are in each phase ("" not counted).
func (r *hookReconciler) phaseCounts() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for _, p := range r.phases {
		if p != "" {
			out[p]++
		}
	}
	return out
}

// History returns the last reconciles of key, oldest first.
func (r *hookReconciler) History(key cache.Key) []Attempt { return r.history.Get(key) }

func (r *hookReconciler) reconcile(ctx context.Context, sp *controllerSpec, key cache.Key, obj *cache.Object, attempt int) (pass, error) {
	if sp.invalid != nil {
		return pass{}, sp.invalid
	}
	kind, ok := r.m.cfg.Kinds.Lookup(sp.resource.Group, sp.version, sp.resource.Resource)
	if !ok {
		return pass{}, fmt.Errorf("%s/%s %s is not served", sp.resource.Group, sp.version, sp.resource.Resource)
	}
	doc, err := obj.Decode()
	if err != nil {
		return pass{}, reconciler.TerminalError(err)
	}
	phase := phaseOf(doc["status"])
	fin := finalizerName(r.name)
	has, deleting := slices.Contains(obj.Finalizers(), fin), obj.Deleting()
	switch {
	case deleting && !has:
		return pass{phase: phase, message: "nothing to do: being deleted, and our finalizer is gone"}, nil
	case has && !sp.finalize:
		// finalize was turned off: the finalizer goes, so nothing waits on it.
		if obj, err = r.setFinalizer(ctx, key, obj, doc, fin, false); err != nil {
			return pass{phase: phase}, err
		}
		if deleting {
			return pass{phase: phase, message: "removed our finalizer (spec.finalize is false)"}, nil
		}
		has = false
	case !has && sp.finalize && !deleting:
		if obj, err = r.setFinalizer(ctx, key, obj, doc, fin, true); err != nil {
			return pass{phase: phase}, r.failed(ctx, kind, obj, err)
		}
		r.record(ctx, kind, obj, events.TypeNormal, events.Info, "FinalizerAdded", "Added finalizer "+fin)
		has = true
	}
	if doc, err = obj.Decode(); err != nil {
		return pass{}, reconciler.TerminalError(err)
	}
	finalizing := deleting && has
	p, err := r.sync(ctx, sp, kind, key, obj, doc, attempt, finalizing)
	if err != nil {
		return p, r.failed(ctx, kind, obj, err)
	}
	return p, nil
}

// sync calls the hook and applies its answer.
func (r *hookReconciler) sync(ctx context.Context, sp *controllerSpec, kind *kinds.Kind, key cache.Key, obj *cache.Object, doc map[string]any, attempt int, finalizing bool) (pass, error) {
	phase := phaseOf(doc["status"])
	childKinds, err := r.childKinds(sp)
	if err != nil {
		return pass{phase: phase}, err
	}
	existing, err := r.children(ctx, kind, obj, childKinds)
	if err != nil {
		return pass{phase: phase}, err
	}
	req := hookRequest{Controller: r.name, Object: inVersion(doc, kind), Children: existing.byKind(childKinds, kind.Namespaced), Attempt: attempt, Finalizing: finalizing}
	ans, err := r.call(ctx, sp, req)
	if err != nil {
		return pass{phase: phase}, err
	}
	desired, err := r.desiredChildren(kind, obj, childKinds, ans.Children)
	if err != nil {
		return pass{phase: phase}, fmt.Errorf("the hook's answer is not valid: %w", err)
	}
	evs, err := checkEvents(ans.Events)
	if err != nil {
		return pass{phase: phase}, fmt.Errorf("the hook's answer is not valid: %w", err)
	}
	if ans.Children != nil {
		if err := r.applyChildren(ctx, desired, existing); err != nil {
			return pass{phase: phase}, err
		}
	}
	for _, e := range evs {
		sev := events.Info
		if e.Type == events.TypeWarning {
			sev = events.Warning
		}
		r.record(ctx, kind, obj, e.Type, sev, e.Reason, e.Message)
	}
	status := ans.Status
	if status == nil {
		status = statusMap(doc)
	} else {
		phase = phaseOf(status)
	}
	if obj, err = r.writeStatus(ctx, kind, key, obj, doc, status, synced(true, "ReconcileSucceeded", "The hook answered and its answer was applied")); err != nil {
		return pass{phase: phase}, fmt.Errorf("storing the hook's status: %w", err)
	}
	p := pass{phase: phase, message: summary(ans)}
	if ans.RequeueAfterSeconds != nil && *ans.RequeueAfterSeconds > 0 {
		p.res.RequeueAfter = time.Duration(*ans.RequeueAfterSeconds * float64(time.Second))
	}
	if finalizing && ans.Finalized {
		if doc, err = obj.Decode(); err != nil {
			return p, reconciler.TerminalError(err)
		}
		fin := finalizerName(r.name)
		if _, err := r.setFinalizer(ctx, key, obj, doc, fin, false); err != nil {
			return p, err
		}
		r.record(ctx, kind, obj, events.TypeNormal, events.Info, "FinalizerRemoved", "The hook finalized the object; removed finalizer "+fin)
		p.message = "finalized: " + p.message
		p.res = reconciler.Result{}
	}
	return p, nil
}

// summary says what an answer asked for, for the history.
func summary(a *hookAnswer) string {
	msg := "synced"
	if a.Children != nil {
		msg += fmt.Sprintf(", %d children", len(a.Children))
	}
	if a.RequeueAfterSeconds != nil && *a.RequeueAfterSeconds > 0 {
		msg += fmt.Sprintf(", requeue after %vs", *a.RequeueAfterSeconds)
	}
	return msg
}

// failed reports a failed reconcile on the object: a ReconcileError Warning event and a
// Synced=False condition with the cause. A conflict is not a failure: the object changed, and
// the controller reconciles it again at once.
func (r *hookReconciler) failed(ctx context.Context, kind *kinds.Kind, obj *cache.Object, cause error) error {
	if reconciler.IsConflict(cause) || ctx.Err() != nil {
		return cause
	}
	r.record(ctx, kind, obj, events.TypeWarning, events.Error, "ReconcileError", cause.Error())
	doc, err := obj.Decode()
	if err != nil {
		return cause
	}
	if _, err := r.writeStatus(ctx, kind, obj.Key(), obj, doc, statusMap(doc), synced(false, "ReconcileError", cause.Error())); err != nil && !errors.Is(err, cache.ErrNotFound) && !reconciler.IsConflict(err) {
		r.m.log.Warn("writing the Synced condition", "controller", r.name, "object", obj.Key().String(), "err", err)
	}
	return cause
}

// Dropped marks the object Synced=False ReconcileFailed once its key is dropped after the last
// retry, with a Critical event.
func (r *hookReconciler) Dropped(ctx context.Context, key cache.Key, cause error) {
	r.mu.Lock()
	delete(r.failures, key)
	r.mu.Unlock()
	sp := r.spec.Load()
	kind, ok := r.m.cfg.Kinds.Lookup(sp.resource.Group, sp.version, sp.resource.Resource)
	if !ok {
		return
	}
	obj, err := r.client.Get(ctx, key)
	if err != nil {
		return
	}
	doc, err := obj.Decode()
	if err != nil {
		return
	}
	msg := fmt.Sprintf("Giving up after repeated failures: %v", cause)
	r.record(ctx, kind, obj, events.TypeWarning, events.Critical, "ReconcileFailed", msg)
	_, _ = r.writeStatus(ctx, kind, key, obj, doc, statusMap(doc), synced(false, "ReconcileFailed", msg))
}

// call POSTs req to the hook and decodes its answer.
func (r *hookReconciler) call(ctx context.Context, sp *controllerSpec, req hookRequest) (*hookAnswer, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	c := callee{
		what: "the hook", url: sp.url, client: sp.client, timeout: sp.timeout, timeoutField: "spec.hook.timeoutSeconds",
		limit: maxAnswerBytes, log: r.m.log, logAttrs: []any{"controller", r.name},
	}
	raw, err := c.post(ctx, body)
	if err != nil {
		return nil, fmt.Errorf("calling the hook: %w", err)
	}
	ans, err := decodeAnswer(raw)
	if err != nil {
		return nil, fmt.Errorf("the hook's answer is not valid: %w", c.undecodable(raw, err))
	}
	return ans, validAnswer(ans)
}

// decodeAnswer decodes a hook's answer strictly: one JSON object of hookAnswer's fields, numbers
// kept as json.Number. Its errors are encoding/json's.
func decodeAnswer(raw []byte) (*hookAnswer, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	var ans hookAnswer
	if err := dec.Decode(&ans); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errMoreThanOne
	}
	return &ans, nil
}

// errMoreThanOne is decodeAnswer's error for an answer of several JSON values.
var errMoreThanOne = errors.New("more than one JSON value")

// validAnswer checks what decoding cannot: requeueAfterSeconds is not negative.
func validAnswer(ans *hookAnswer) error {
	if ans.RequeueAfterSeconds != nil && *ans.RequeueAfterSeconds < 0 {
		return errors.New("the hook's answer is not valid: requeueAfterSeconds is negative")
	}
	return nil
}

// checkEvents checks the events of an answer: a type of Normal (the default) or Warning, and a
// reason.
func checkEvents(evs []hookEvent) ([]hookEvent, error) {
	if len(evs) > maxEvents {
		return nil, fmt.Errorf("%d events; at most %d per answer", len(evs), maxEvents)
	}
	out := make([]hookEvent, 0, len(evs))
	for i, e := range evs {
		switch e.Type {
		case "":
			e.Type = events.TypeNormal
		case events.TypeNormal, events.TypeWarning:
		default:
			return nil, fmt.Errorf("events[%d].type is %q; it must be Normal or Warning", i, e.Type)
		}
		if e.Reason == "" {
			return nil, fmt.Errorf("events[%d] has no reason", i)
		}
		out = append(out, e)
	}
	return out, nil
}

// setFinalizer adds or removes fin on the object (with its resourceVersion as precondition).
func (r *hookReconciler) setFinalizer(ctx context.Context, key cache.Key, obj *cache.Object, doc map[string]any, fin string, add bool) (*cache.Object, error) {
	fins := slices.DeleteFunc(slices.Clone(obj.Finalizers()), func(f string) bool { return f == fin })
	if add {
		fins = append(fins, fin)
	}
	l := make([]any, len(fins))
	for i, f := range fins {
		l[i] = f
	}
	md := doc["metadata"].(map[string]any)
	md["finalizers"] = l
	md["resourceVersion"] = strconv.FormatUint(obj.ResourceVersion(), 10)
	out, err := r.client.Update(ctx, key, doc)
	if err != nil {
		return obj, err
	}
	return out, nil
}

// writeStatus stores status, with cond as its Synced condition when the kind's schema has room
// for conditions, through the status subresource when it differs from the stored one.
func (r *hookReconciler) writeStatus(ctx context.Context, kind *kinds.Kind, key cache.Key, obj *cache.Object, doc, status map[string]any, cond condition) (*cache.Object, error) {
	cur := statusMap(doc)
	next := r.m.withSynced(kind, status, cur, cond, obj.Generation(), r.m.cfg.Clock.Now())
	a, _ := json.Marshal(next)
	b, _ := json.Marshal(cur)
	if _, had := doc["status"]; had && bytes.Equal(a, b) {
		return obj, nil
	}
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		out[k] = v
	}
	md := make(map[string]any, len(doc))
	for k, v := range doc["metadata"].(map[string]any) {
		md[k] = v
	}
	md["resourceVersion"] = strconv.FormatUint(obj.ResourceVersion(), 10)
	out["metadata"] = md
	out["status"] = next
	return r.client.UpdateStatus(ctx, key, out)
}

// record records an event on the object, as the Controller (its name is the source).
func (r *hookReconciler) record(ctx context.Context, kind *kinds.Kind, obj *cache.Object, typ string, sev events.Severity, reason, msg string) {
	if r.m.cfg.Events == nil {
		return
	}
	k := obj.Key()
	r.m.cfg.Events.Record(ctx, events.Event{
		Object: events.Ref{APIVersion: kind.GroupVersion(), Kind: kind.Kind, Namespace: k.Namespace, Name: k.Name,
			UID: obj.UID(), ResourceVersion: strconv.FormatUint(obj.ResourceVersion(), 10)},
		Type: typ, Severity: sev, Reason: reason, Message: msg, Source: r.name,
	})
}

// finalizerName is the finalizer a Controller keeps on its objects: controllers.opemu.dev/<name>,
// the name shortened with a hash when it is longer than a finalizer's name may be.
func finalizerName(controller string) string {
	name := controller
	if len(name) > 63 {
		sum := sha256.Sum256([]byte(controller))
		name = name[:50] + "-" + hex.EncodeToString(sum[:6])
	}
	return Resource.Group + "/" + name
}

// inVersion is a shallow copy of a stored object in kind's version (a CRD's versions convert
// with strategy None: only apiVersion changes).
func inVersion(doc map[string]any, kind *kinds.Kind) map[string]any {
	out := make(map[string]any, len(doc))
	for k, v := range doc {
		out[k] = v
	}
	out["apiVersion"] = kind.GroupVersion()
	return out
}

func statusMap(doc map[string]any) map[string]any {
	st, _ := doc["status"].(map[string]any)
	if st == nil {
		return map[string]any{}
	}
	return st
}

func phaseOf(status any) string {
	st, _ := status.(map[string]any)
	p, _ := st["phase"].(string)
	return p
}
