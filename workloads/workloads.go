package workloads

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/clock"
)

// The resources the simulators reconcile.
var (
	DeploymentResource  = cache.GroupResource{Group: "apps", Resource: "deployments"}
	ReplicaSetResource  = cache.GroupResource{Group: "apps", Resource: "replicasets"}
	PodResource         = cache.GroupResource{Resource: "pods"}
	StatefulSetResource = cache.GroupResource{Group: "apps", Resource: "statefulsets"}
	JobResource         = cache.GroupResource{Group: "batch", Resource: "jobs"}
)

// Client is how the simulators read objects and write their status: the in-process API client
// (registry.Client), so a status passes the kind's schema like a client's.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
	Create(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Delete(ctx context.Context, key cache.Key, pre cache.Preconditions) (*cache.Object, bool, error)
}

// EventRecorder records Events (*events.Recorder implements it).
type EventRecorder interface {
	Record(ctx context.Context, ev events.Event)
}

// Config configures the simulators. Client is required.
type Config struct {
	Client Client
	// Events may be nil.
	Events EventRecorder
	// RolloutStep is the time between the steps of a Deployment's or StatefulSet's rollout;
	// zero rolls out at once.
	RolloutStep time.Duration
	// JobDuration is how long a Job's pods run (each wave of parallelism pods); zero completes
	// a Job at once.
	JobDuration time.Duration
	// Clock stamps status times and paces steps. Nil means the real clock.
	Clock clock.PassiveClock
}

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	return c
}

// pacer keeps when the next step of each object is due: the controller enqueues a changed key
// no earlier (reconciler.Scheduler), so a burst of changes is one pass.
type pacer struct {
	// mu guards next.
	mu   sync.Mutex
	next map[cache.Key]time.Time
}

// NotBefore is when the next step of key is due (zero: now).
func (p *pacer) NotBefore(key cache.Key) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.next[key]
}

// ForgetSchedules forgets when each object's next step is due, for a clock that was set back (a
// snapshot restored with its time): each object's next pass is due at once.
func (p *pacer) ForgetSchedules() {
	p.mu.Lock()
	defer p.mu.Unlock()
	clear(p.next)
}

// schedule sets key's next step at t (zero: none) and returns the reconciler's result: a
// requeue after t - now.
func (p *pacer) schedule(key cache.Key, t, now time.Time) reconciler.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t.IsZero() {
		delete(p.next, key)
		return reconciler.Result{}
	}
	if p.next == nil {
		p.next = map[cache.Key]time.Time{}
	}
	p.next[key] = t
	return reconciler.Result{RequeueAfter: t.Sub(now)}
}

// due returns the wait before key's next step, zero when it is due.
func (p *pacer) due(key cache.Key, now time.Time) time.Duration {
	if t := p.NotBefore(key); now.Before(t) {
		return t.Sub(now)
	}
	return 0
}

// begin starts a pass of a simulator at now: it reads key's object into v and returns it when
// a step is due. Otherwise obj is nil and the pass ends with res, or with err (a failed read):
// ended says the object needs no more steps (it is gone or being deleted, or finished, which
// may be nil, reports it done), and its schedule is dropped; else its next step is not yet due.
func (p *pacer) begin(ctx context.Context, c Client, key cache.Key, v any, now time.Time, finished func() bool) (obj *cache.Object, ended bool, res reconciler.Result, err error) {
	obj, gone, err := read(ctx, c, key, v)
	if gone || (err == nil && (obj.Deleting() || (finished != nil && finished()))) {
		return nil, true, p.schedule(key, time.Time{}, now), nil
	}
	if err != nil {
		return nil, false, reconciler.Result{}, err
	}
	if wait := p.due(key, now); wait > 0 {
		return nil, false, reconciler.Result{RequeueAfter: wait}, nil
	}
	return obj, false, reconciler.Result{}, nil
}

// read gets key's object and decodes it into v; gone says it no longer exists.
func read(ctx context.Context, c Client, key cache.Key, v any) (obj *cache.Object, gone bool, err error) {
	obj, err = c.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return nil, true, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(obj.Raw(), v); err != nil {
		return nil, false, reconciler.TerminalError(err)
	}
	return obj, false, nil
}

// writeStatus stores status as obj's status through the status subresource, conditional on
// the version read; a conflict makes the controller try again on the newer object.
func writeStatus(ctx context.Context, c Client, obj *cache.Object, status any) error {
	m, err := obj.Decode()
	if err != nil {
		return reconciler.TerminalError(err)
	}
	raw, err := json.Marshal(status)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	st, err := cache.DecodeJSON(raw)
	if err != nil {
		return reconciler.TerminalError(err)
	}
	m["status"] = st
	m["metadata"].(map[string]any)["resourceVersion"] = strconv.FormatUint(obj.ResourceVersion(), 10)
	_, err = c.UpdateStatus(ctx, obj.Key(), m)
	return err
}

// record records a Normal Event about obj.
func record(ctx context.Context, cfg Config, obj *cache.Object, apiVersion, kind, source, reason, msg string) {
	if cfg.Events == nil {
		return
	}
	k := obj.Key()
	cfg.Events.Record(ctx, events.Event{
		Object: events.Ref{APIVersion: apiVersion, Kind: kind, Namespace: k.Namespace, Name: k.Name, UID: obj.UID(),
			ResourceVersion: strconv.FormatUint(obj.ResourceVersion(), 10)},
		Type: events.TypeNormal, Severity: events.Info, Reason: reason, Message: msg, Source: source,
	})
}

// templateHash names a pod template as kube-controller-manager's pod-template-hash does (an
// FNV-32a hash of the template, encoded with rand.SafeEncodeString), here of its JSON.
func templateHash(template any) string {
	raw, _ := json.Marshal(template)
	h := fnv.New32a()
	_, _ = h.Write(raw)
	return rand.SafeEncodeString(strconv.FormatUint(uint64(h.Sum32()), 10))
}

// stepSize is how far a count moves per step: ceil(max(current, desired)/4), at least 1, as
// for Applications.
func stepSize(current, desired int32) int32 {
	return max((max(current, desired)+3)/4, 1)
}

// toward moves cur one step of size delta toward want.
func toward(cur, want, delta int32) int32 {
	if cur < want {
		return min(cur+delta, want)
	}
	return max(cur-delta, want)
}

// equalJSON reports whether a and b encode alike: two statuses compared as they would be
// stored (times to the second).
func equalJSON(a, b any) bool {
	ra, err1 := json.Marshal(a)
	rb, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(ra, rb)
}
