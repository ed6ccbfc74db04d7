package stages

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"text/template"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/kwok/pkg/apis/internalversion"
	"sigs.k8s.io/kwok/pkg/apis/v1alpha1"
	"sigs.k8s.io/kwok/pkg/utils/gotpl"
	"sigs.k8s.io/kwok/pkg/utils/lifecycle"
)

// Client is how the Engine reads Stages and writes what they do: the in-process API client
// (registry.Client), so a Stage's patch passes the write path's rules like kwok's.
type Client interface {
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Patch(ctx context.Context, key cache.Key, sub, patchType string, body []byte) (*cache.Object, error)
	DeleteWithGrace(ctx context.Context, key cache.Key, pre cache.Preconditions, grace int64) (*cache.Object, bool, error)
}

// Recorder records a Stage's event (events.Recorder).
type Recorder interface {
	Record(ctx context.Context, ev events.Event)
}

// Config configures an Engine. Client is required; zero values are documented defaults.
type Config struct {
	Client Client
	// Events records the Stages' events. Nil: they are dropped.
	Events Recorder
	// Clock is what Now, StartTime and the delays read. Nil means the real clock.
	Clock clock.PassiveClock
	// Funcs are template functions added to kwok's (the kubelets' NodeIPWith, PodIPWith, ...).
	Funcs template.FuncMap
	// Fixed, when not nil, are the Stages played instead of those stored in the API (which
	// are then not read): a server that does not serve the Stage kind.
	Fixed []*v1alpha1.Stage
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

// Source is the component the Stages' Events name, as kwok's.
const Source = "kwok"

// PodRef is the resourceRef of the Stages of Pods.
var PodRef = internalversion.StageResourceRef{APIGroup: "v1", Kind: "Pod"}

// Engine plays the Stages stored in the API on the objects it is given. It is safe for
// concurrent use by a controller's workers.
type Engine struct {
	cfg      Config
	renderer gotpl.Renderer

	// mu guards the rest.
	mu      sync.Mutex
	loaded  bool
	byRef   map[internalversion.StageResourceRef]lifecycle.Lifecycle
	plans   map[cache.Key]plan
	invalid map[string]string // Stages that cannot be played, by name: why
}

// plan is a stage matched for an object at a resourceVersion, and when it is due.
type plan struct {
	rv    uint64
	stage *lifecycle.Stage // nil: nothing matched
	due   time.Time
}

// New makes the Engine of cfg.
func New(cfg Config) (*Engine, error) {
	if cfg.Client == nil {
		return nil, errors.New("stages: Client is required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	start := cfg.Clock.Now().Format(time.RFC3339Nano)
	funcs := template.FuncMap{
		"Now":       func() string { return cfg.Clock.Now().Format(time.RFC3339Nano) },
		"StartTime": func() string { return start },
	}
	maps.Copy(funcs, cfg.Funcs)
	e := &Engine{cfg: cfg, renderer: gotpl.NewRenderer(funcs)}
	e.Reset()
	return e, nil
}

// Reset forgets the Stages (read again on the next pass) and every plan.
func (e *Engine) Reset() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.loaded, e.byRef, e.plans, e.invalid = false, nil, map[cache.Key]plan{}, map[string]string{}
}

// ForgetSchedules forgets when objects are due (a clock set back): their next pass matches
// them again.
func (e *Engine) ForgetSchedules() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.plans)
}

// Forget forgets the object at key (it is gone).
func (e *Engine) Forget(key cache.Key) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.plans, key)
}

// Invalid are the stored Stages that cannot be played (a selector or delay that does not
// compile), by name: why.
func (e *Engine) Invalid() map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.invalid)
}

// Load reads the Stages stored in the API, unless they were read since the last change.
func (e *Engine) Load(ctx context.Context) error {
	e.mu.Lock()
	loaded := e.loaded
	e.mu.Unlock()
	if loaded {
		return nil
	}
	all := e.cfg.Fixed
	if all == nil {
		l, err := e.cfg.Client.List(ctx, Resource)
		if err != nil {
			return err
		}
		for _, o := range l.Items {
			var s v1alpha1.Stage
			if err := json.Unmarshal(o.Raw(), &s); err != nil {
				return err
			}
			all = append(all, &s)
		}
	}
	byRef := map[internalversion.StageResourceRef]lifecycle.Lifecycle{}
	invalid := map[string]string{}
	for _, s := range all {
		st, err := compile(ctx, s.DeepCopy())
		if err != nil {
			invalid[s.Name] = err.Error()
			e.cfg.Logger.Warn("a Stage cannot be played", "stage", s.Name, "err", err)
			continue
		}
		if st != nil {
			byRef[st.ref] = append(byRef[st.ref], st.stage)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.byRef, e.invalid, e.loaded = byRef, invalid, true
	return nil
}

// kwokCEL serializes what may touch easycel's process-wide type caches (kwok's CEL library
// keeps maps without locks, written the first time it meets a Go type): building a Stage's CEL
// environment (compile) and matching its selectors and delay. One per process, as the caches
// are: every Engine of the process (testenv starts many) takes it.
var kwokCEL sync.Mutex

// compiled is one Stage ready to be played on objects of ref.
type compiled struct {
	ref   internalversion.StageResourceRef
	stage *lifecycle.Stage
}

// compile converts a stored Stage as kwok does and compiles its selectors, weight and delay
// by matching a zero object of its kind (kwok compiles on first use). A Stage without a
// selector matches nothing (kwok's rule): nil.
func compile(ctx context.Context, s *v1alpha1.Stage) (*compiled, error) {
	v1alpha1.SetObjectDefaults_Stage(s)
	in, err := internalversion.ConvertToInternalStage(s)
	if err != nil {
		return nil, err
	}
	st := lifecycle.NewStage(in)
	if st == nil {
		return nil, nil
	}
	ref := in.Spec.ResourceRef
	if ref == PodRef {
		ev := &lifecycle.Event{Data: &corev1.Pod{}}
		kwokCEL.Lock()
		defer kwokCEL.Unlock()
		if _, err := (lifecycle.Lifecycle{st}).Match(ctx, ev); err != nil {
			return nil, err
		}
		if _, _, err := st.Delay(ctx, ev, time.Time{}); err != nil {
			return nil, err
		}
	}
	return &compiled{ref: ref, stage: st}, nil
}

// Watcher is how Follow watches: the store, or the in-process client.
type Watcher interface {
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
}

// Follow watches the Stages until ctx is done; on every change it reads them again and calls
// changed (which enqueues the objects they may now concern). It blocks until ctx is done.
func (e *Engine) Follow(ctx context.Context, w Watcher, changed func()) {
	if e.cfg.Fixed != nil {
		return
	}
	cache.Follow(ctx, w, cache.WatchOptions{Resources: []cache.GroupResource{Resource}, SendInitialEvents: true}, func(ev cache.Event) {
		if ev.Type == cache.Bookmark {
			return
		}
		e.mu.Lock()
		e.loaded = false
		clear(e.plans) // matched against Stages that changed
		e.mu.Unlock()
		changed()
	})
}

// MaxChain bounds how many Stages one pass plays on an object: each write of a Stage matches
// the object again at once (what kwok does on the write's event), and a Stage that keeps
// matching its own result stops there until the object changes.
const MaxChain = 16

// PlayPod plays the Stages due on pod (obj, decoded): the first pass at a resourceVersion
// matches it (by weight among several) and computes the delay on the clock; the pass when it
// is due runs the Stage's steps, then matches what they wrote, and so on while Stages are due
// at once. It returns how long until the next matched Stage is due (zero: none matched) and
// whether the Pod was deleted.
func (e *Engine) PlayPod(ctx context.Context, obj *cache.Object, pod *corev1.Pod) (wait time.Duration, deleted bool, err error) {
	if err := e.Load(ctx); err != nil {
		return 0, false, err
	}
	for range MaxChain {
		var next *cache.Object
		wait, next, deleted, err = e.step(ctx, obj, pod)
		if err != nil || wait > 0 || deleted || next == nil || next.ResourceVersion() == obj.ResourceVersion() {
			return wait, deleted, err
		}
		obj, pod = next, &corev1.Pod{}
		if err := json.Unmarshal(obj.Raw(), pod); err != nil {
			return 0, false, err
		}
	}
	return 0, false, nil
}

// step matches pod against the Stages, or plays the Stage matched at its resourceVersion when
// it is due: it returns the wait, or what the Stage's last write stored (nil: no write).
func (e *Engine) step(ctx context.Context, obj *cache.Object, pod *corev1.Pod) (time.Duration, *cache.Object, bool, error) {
	key, now := obj.Key(), e.cfg.Clock.Now()
	e.mu.Lock()
	p, ok := e.plans[key]
	lc := e.byRef[PodRef]
	e.mu.Unlock()
	ev := &lifecycle.Event{Labels: pod.Labels, Annotations: pod.Annotations, Data: pod}
	if !ok || p.rv != obj.ResourceVersion() {
		p = plan{rv: obj.ResourceVersion(), due: now}
		var err error
		kwokCEL.Lock()
		p.stage, err = lc.Match(ctx, ev)
		var d time.Duration
		if err == nil && p.stage != nil {
			d, _, err = p.stage.Delay(ctx, ev, now)
			if err != nil {
				e.cfg.Logger.Warn("a Stage's delay", "stage", p.stage.Name(), "pod", key.Namespace+"/"+key.Name, "err", err)
				err = nil
			}
		}
		kwokCEL.Unlock()
		if err != nil {
			return 0, nil, false, err
		}
		if p.stage != nil {
			p.due = now.Add(max(d, 0))
		}
		e.mu.Lock()
		e.plans[key] = p
		e.mu.Unlock()
	}
	if p.stage == nil {
		return 0, nil, false, nil
	}
	if wait := p.due.Sub(now); wait > 0 {
		return wait, nil, false, nil
	}
	written, deleted, err := e.play(ctx, obj, pod, p.stage)
	if err != nil {
		return 0, nil, deleted, err // the retry plays the Stage again
	}
	e.mu.Lock()
	if cur, ok := e.plans[key]; ok && cur.rv == p.rv {
		cur.stage = nil // played: the next change matches again
		e.plans[key] = cur
	}
	e.mu.Unlock()
	return 0, written, deleted, nil
}

// play runs stage's steps on pod, as kwok's pod controller does: an Event, finalizers (a JSON
// patch), delete (with a grace period of 0), patches (rendered from their templates; a Pod's
// are strategic merge patches unless they say otherwise).
func (e *Engine) play(ctx context.Context, obj *cache.Object, pod *corev1.Pod, stage *lifecycle.Stage) (written *cache.Object, deleted bool, err error) {
	key := obj.Key()
	_, err = stage.DoSteps(0, slices.Clone(pod.Finalizers), pod, e.renderer,
		func(se *internalversion.StageEvent) error {
			if e.cfg.Events != nil {
				e.cfg.Events.Record(ctx, events.Event{
					Object: events.Ref{APIVersion: "v1", Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID)},
					Type:   se.Type, Reason: se.Reason, Message: se.Message, Source: Source,
				})
			}
			return nil
		},
		func() error {
			_, removed, err := e.cfg.Client.DeleteWithGrace(ctx, key, cache.Preconditions{UID: obj.UID()}, 0)
			switch {
			case errors.Is(err, cache.ErrNotFound):
				deleted = true
			case err != nil:
				return err
			default:
				deleted = removed // else its finalizers hold it
			}
			return nil
		},
		func(p *lifecycle.Patch) error {
			o, err := e.cfg.Client.Patch(ctx, key, p.Subresource, string(p.Type), p.Data)
			if err == nil {
				written = o
			}
			return err
		},
		func(*lifecycle.Apply) error {
			return fmt.Errorf("stage %s: apply steps are not supported", stage.Name())
		},
	)
	return written, deleted, err
}
