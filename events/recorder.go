package events

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/metrics"
	"k8s.io/utils/clock"
)

// Resource is where Events are stored.
var Resource = cache.GroupResource{Resource: "events"}

// Severity grades an Event beyond Kubernetes' Normal/Warning type.
type Severity string

// Severities.
const (
	Info     Severity = "Info"
	Warning  Severity = "Warning"
	Error    Severity = "Error"
	Critical Severity = "Critical"
)

// Event types, as Kubernetes allows them.
const (
	TypeNormal  = "Normal"
	TypeWarning = "Warning"
)

// Ref identifies the object an Event is about.
type Ref struct {
	APIVersion, Kind, Namespace, Name, UID, ResourceVersion string
}

// Event is one occurrence a caller records.
type Event struct {
	Object   Ref
	Type     string // TypeNormal or TypeWarning
	Severity Severity
	Reason   string
	Message  string
	// Source is the component reporting it, e.g. "opemu-apiserver", "application-controller".
	Source string
}

// Client is how the recorder reads and writes Events: the in-process client of the API
// (registry.Client). Aggregation's updates pass the same validation as a client's; new Events,
// valid by construction, take the cheaper CreateEvent.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	// CreateEvent stores a new Event the recorder built; it may skip the checks a client's
	// Event needs, since the recorder builds only valid ones, and encode it directly.
	CreateEvent(ctx context.Context, ev Stored) (*cache.Object, error)
	// Expire removes an Event the TTL drops, as an expiry: at once, whatever its finalizers.
	// A missing Event is not an error.
	Expire(ctx context.Context, key cache.Key) error
}

// Config configures a Recorder. Client is required; zero values are documented defaults.
type Config struct {
	Client Client
	// Host is the reporting instance (POD_NAME), stored as source.host.
	Host string
	// TTL is how long Run keeps an Event not seen again (by its lastTimestamp), for a store
	// that does not expire Events itself (the in-memory store; on etcd each Event's lease of
	// the Event kind's TTL does). Zero means DefaultTTL. (EVENT_LIMIT is the Event kind's:
	// Kind.)
	TTL time.Duration
	// Window is how recent an identical Event must be to be aggregated. Zero means 60 s.
	Window time.Duration
	// Clock stamps Events and paces the expiry sweep. Nil means the real clock.
	Clock   clock.WithTicker
	Metrics *metrics.Registry
	Logger  *slog.Logger
	// Queue, when positive, makes Record return at once and Work write the Events from a queue
	// that long, as Kubernetes' event broadcaster does: for a store where each write is a round
	// trip to etcd, an action's Event then costs its client nothing. A full queue makes Record
	// write the Event itself, so none is dropped. Zero: Record writes before it returns.
	Queue int
}

// Recorder records, aggregates, expires and queries Events.
type Recorder struct {
	cfg   Config
	seq   atomic.Uint64
	queue chan queued // nil unless Config.Queue

	// mu guards index and order (the Events this recorder wrote within the last Window, at
	// most indexSize, which the next identical Event aggregates into) and each entry's last. It is never held
	// across a write: an entry's own mu orders the writes of one aggregate. Lock order:
	// entry.mu, then mu.
	mu    sync.Mutex
	index map[aggKey]*entry
	order *list.List // *entry, least recently recorded first; those older than Window go
}

// aggKey is what makes two Events "the same" for aggregation.
type aggKey struct {
	uid, kind, namespace, name string
	typ, reason, source        string
}

// entry is one Event this recorder wrote (or is writing) and aggregates into.
type entry struct {
	agg aggKey
	key cache.Key
	el  *list.Element // in Recorder.order; nil once forgotten
	// last is when it was last recorded; guarded by Recorder.mu.
	last time.Time

	// mu serialises the writes of this aggregate, its create then its bumps, so that
	// concurrent identical Events end as one Event with their count. It is held across those
	// writes; Recorder.mu may be taken while holding it (to forget the entry), never the
	// other way round.
	mu      sync.Mutex
	created bool // guarded by mu
}

// New returns a Recorder; call Run to expire Events over time.
func New(cfg Config) *Recorder {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultTTL
	}
	if cfg.Window <= 0 {
		cfg.Window = time.Minute
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Recorder{cfg: cfg, index: map[aggKey]*entry{}, order: list.New()}
	if cfg.Queue > 0 {
		r.queue = make(chan queued, cfg.Queue)
	}
	return r
}

// queued is an Event waiting to be written, with the time it was recorded at.
type queued struct {
	ev  Event
	now time.Time
}

// workers is how many goroutines of Work write queued Events.
const workers = 8

// Work writes the queued Events (Config.Queue) until ctx ends; the Events still queued or being
// written then are dropped (and counted in the log), so a stopping replica does not wait on
// etcd. Every replica runs it.
func (r *Recorder) Work(ctx context.Context) error {
	if r.queue == nil {
		return nil
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case q := <-r.queue:
					r.record(ctx, q.ev, q.now)
				}
			}
		})
	}
	wg.Wait()
	if n := len(r.queue); n > 0 {
		r.cfg.Logger.Info("events: dropping the Events still queued at shutdown", "count", n)
	}
	return nil
}

// errGone says the Event an entry aggregates into was deleted meanwhile.
var errGone = errors.New("events: aggregated event is gone")

// Record stores ev, or aggregates it into an identical Event from the last Window. Failures
// are logged, never returned: recording an Event must not fail the action it describes.
func (r *Recorder) Record(ctx context.Context, ev Event) {
	if r == nil {
		return
	}
	if ev.Type == "" {
		ev.Type = TypeNormal
	}
	if ev.Severity == "" {
		ev.Severity = Info
		if ev.Type == TypeWarning {
			ev.Severity = Warning
		}
	}
	r.cfg.Metrics.RecordEvent(ev.Type, string(ev.Severity))
	ev = bounded(ev)
	now := r.cfg.Clock.Now()
	if r.queue != nil {
		select {
		case r.queue <- queued{ev, now}:
			return
		default: // full: write it here
		}
	}
	r.record(ctx, ev, now)
}

// record writes ev (recorded at now): a new Event, or a bump of the one it aggregates into.
func (r *Recorder) record(ctx context.Context, ev Event, now time.Time) {
	k := aggKey{uid: ev.Object.UID, typ: ev.Type, reason: ev.Reason, source: ev.Source}
	if k.uid == "" { // a uid names one object; without one, its kind, namespace and name do
		k.kind, k.namespace, k.name = ev.Object.Kind, ev.Object.Namespace, ev.Object.Name
	}
	// Twice at most: when the Event to aggregate into was deleted meanwhile (expired, or by a
	// client), the second pass records a new one.
	for range 2 {
		if err := r.write(ctx, r.reserve(k, ev, now), ev, now); !errors.Is(err, errGone) {
			return
		}
	}
}

// indexSize bounds the recorder's index, the Events it may still aggregate into, as
// client-go's event correlator bounds its LRU cache (at 4,096): the most recently recorded
// DefaultLimit, so that aggregation reaches as far as it did when the index was the limit's.
const indexSize = DefaultLimit

// reserve returns the entry ev aggregates into (a new one when none is recent), moved to the
// back of the order. Entries older than Window, which nothing aggregates into any more, are
// forgotten first, and the least recently recorded beyond indexSize, so the index holds at
// most indexSize of the last Window's Events however fast they come.
func (r *Recorder) reserve(k aggKey, ev Event, now time.Time) *entry {
	r.mu.Lock()
	defer r.mu.Unlock()
	for el := r.order.Front(); el != nil && now.Sub(el.Value.(*entry).last) >= r.cfg.Window; el = r.order.Front() {
		r.forgetLocked(el.Value.(*entry))
	}
	e := r.index[k]
	if e == nil {
		if r.order.Len() >= indexSize {
			r.forgetLocked(r.order.Front().Value.(*entry))
		}
		e = &entry{agg: k, key: r.eventKey(ev, now)}
		e.el = r.order.PushBack(e)
		r.index[k] = e
	} else {
		r.order.MoveToBack(e.el)
	}
	e.last = now
	return e
}

// write creates e's Event or bumps it, holding e.mu (not r.mu).
func (r *Recorder) write(ctx context.Context, e *entry, ev Event, now time.Time) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.created {
		if _, err := r.cfg.Client.CreateEvent(ctx, Stored{Key: e.key, Event: ev, Host: r.cfg.Host, Time: now}); err != nil {
			r.cfg.Logger.Warn("recording an event", "reason", ev.Reason, "err", err)
			r.forget(e)
			return err
		}
		e.created = true
		return nil
	}
	err := r.bump(ctx, e.key, ev, now)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		r.forget(e)
		return errGone
	case err != nil:
		r.cfg.Logger.Warn("aggregating an event", "reason", ev.Reason, "err", err)
	}
	return err
}

func (r *Recorder) forget(e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forgetLocked(e)
}

func (r *Recorder) forgetLocked(e *entry) {
	if r.index[e.agg] == e {
		delete(r.index, e.agg)
	}
	if e.el != nil {
		r.order.Remove(e.el)
		e.el = nil
	}
}

// eventKey names a new Event about ev's object.
func (r *Recorder) eventKey(ev Event, now time.Time) cache.Key {
	ns := ev.Object.Namespace
	if ns == "" {
		ns = "default" // Events about cluster-scoped objects live in default, as in Kubernetes.
	}
	name := eventName(ev.Object.Name, uint64(now.UnixNano())+r.seq.Add(1))
	return cache.Key{Resource: Resource.Resource, Namespace: ns, Name: name}
}

// Stored is a new Event as the recorder stores it: the v1 Event (with severity) that Object
// spells out, at Key.
type Stored struct {
	Key   cache.Key
	Event Event // bounded, with its Type and Severity set
	// Host is the reporting instance; Time is when it was first (and last) seen.
	Host string
	Time time.Time
}

// Object is the v1 Event s stands for, decoded, with only the metadata the recorder sets (the
// write path stamps the rest).
func (s Stored) Object() map[string]any {
	ts := s.Time.UTC().Format(time.RFC3339)
	ev := s.Event
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Event",
		"metadata":   map[string]any{"name": s.Key.Name, "namespace": s.Key.Namespace},
		"involvedObject": map[string]any{
			"apiVersion": ev.Object.APIVersion, "kind": ev.Object.Kind, "namespace": ev.Object.Namespace,
			"name": ev.Object.Name, "uid": ev.Object.UID, "resourceVersion": ev.Object.ResourceVersion,
		},
		"reason":             ev.Reason,
		"message":            ev.Message,
		"source":             map[string]any{"component": ev.Source, "host": s.Host},
		"reportingComponent": ev.Source,
		"reportingInstance":  s.Host,
		"firstTimestamp":     ts,
		"lastTimestamp":      ts,
		"count":              json.Number("1"),
		"type":               ev.Type,
		"severity":           string(ev.Severity),
		"eventTime":          nil,
	}
}

// bump updates the aggregated Event at key: count+1, lastTimestamp, the latest message.
func (r *Recorder) bump(ctx context.Context, key cache.Key, ev Event, now time.Time) error {
	cur, err := r.cfg.Client.Get(ctx, key)
	if err != nil {
		return err
	}
	obj, err := cur.Decode()
	if err != nil {
		return err
	}
	count := int64(1)
	if n, ok := obj["count"].(json.Number); ok {
		count, _ = n.Int64()
	}
	obj["count"] = json.Number(strconv.FormatInt(count+1, 10))
	obj["lastTimestamp"] = now.UTC().Format(time.RFC3339)
	obj["message"] = ev.Message
	obj["severity"] = string(ev.Severity)
	delete(obj["metadata"].(map[string]any), "resourceVersion")
	_, err = r.cfg.Client.Update(ctx, key, obj)
	return err
}
