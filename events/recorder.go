package events

import (
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
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

// Config configures a Recorder. Store is required; zero values are documented defaults.
type Config struct {
	Store *cache.Store
	// Host is the reporting instance (POD_NAME), stored as source.host.
	Host string
	// Limit is the most Events kept; beyond it the oldest lastTimestamp goes. Zero means 10000.
	Limit int
	// TTL removes an Event not updated for this long. Zero means 1 h.
	TTL time.Duration
	// Window is how recent an identical Event must be to be aggregated. Zero means 60 s.
	Window time.Duration
	// Clock stamps Events and paces the expiry sweep. Nil means the real clock.
	Clock   clock.WithTicker
	Metrics *metrics.Registry
	Logger  *slog.Logger
}

// Recorder records, aggregates, expires and queries Events.
type Recorder struct {
	cfg Config
	seq atomic.Uint64

	// mu guards index and order: the Events this recorder wrote, for aggregation and the limit.
	mu    sync.Mutex
	index map[aggKey]*list.Element // of *entry
	order *list.List               // *entry, least recently updated first
	byKey map[cache.Key]*list.Element
}

// aggKey is what makes two Events "the same" for aggregation.
type aggKey struct {
	uid, kind, namespace, name string
	typ, reason, source        string
}

type entry struct {
	agg  aggKey
	key  cache.Key
	last time.Time
}

// New returns a Recorder; call Run to expire Events over time.
func New(cfg Config) *Recorder {
	if cfg.Limit <= 0 {
		cfg.Limit = 10000
	}
	if cfg.TTL <= 0 {
		cfg.TTL = time.Hour
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
	return &Recorder{cfg: cfg, index: map[aggKey]*list.Element{}, order: list.New(), byKey: map[cache.Key]*list.Element{}}
}

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
	now := r.cfg.Clock.Now()
	k := aggKey{ev.Object.UID, ev.Object.Kind, ev.Object.Namespace, ev.Object.Name, ev.Type, ev.Reason, ev.Source}

	r.mu.Lock()
	defer r.mu.Unlock()
	if el, ok := r.index[k]; ok {
		e := el.Value.(*entry)
		if now.Sub(e.last) < r.cfg.Window {
			if err := r.bumpLocked(ctx, e, ev, now); err == nil {
				r.order.MoveToBack(el)
				return
			} else if !errors.Is(err, cache.ErrNotFound) {
				r.cfg.Logger.Warn("aggregating an event", "reason", ev.Reason, "err", err)
				return
			}
		}
		r.forgetLocked(el)
	}
	key, err := r.createLocked(ctx, ev, now)
	if err != nil {
		r.cfg.Logger.Warn("recording an event", "reason", ev.Reason, "err", err)
		return
	}
	el := r.order.PushBack(&entry{agg: k, key: key, last: now})
	r.index[k], r.byKey[key] = el, el
	for r.order.Len() > r.cfg.Limit {
		oldest := r.order.Front()
		r.forgetLocked(oldest)
		_, _, _ = r.cfg.Store.Delete(ctx, oldest.Value.(*entry).key, cache.Preconditions{}, cache.WriteOptions{})
	}
}

func (r *Recorder) forgetLocked(el *list.Element) {
	e := el.Value.(*entry)
	if cur, ok := r.index[e.agg]; ok && cur == el {
		delete(r.index, e.agg)
	}
	delete(r.byKey, e.key)
	r.order.Remove(el)
}

// createLocked writes a new Event object and returns its key.
func (r *Recorder) createLocked(ctx context.Context, ev Event, now time.Time) (cache.Key, error) {
	ns := ev.Object.Namespace
	if ns == "" {
		ns = "default" // Events about cluster-scoped objects live in default, as in Kubernetes.
	}
	name := fmt.Sprintf("%s.%x", ev.Object.Name, uint64(now.UnixNano())+r.seq.Add(1))
	ts := now.UTC().Format(time.RFC3339)
	obj := map[string]any{
		"apiVersion": "v1",
		"kind":       "Event",
		"metadata":   map[string]any{"name": name, "namespace": ns},
		"involvedObject": map[string]any{
			"apiVersion": ev.Object.APIVersion, "kind": ev.Object.Kind, "namespace": ev.Object.Namespace,
			"name": ev.Object.Name, "uid": ev.Object.UID, "resourceVersion": ev.Object.ResourceVersion,
		},
		"reason":             ev.Reason,
		"message":            ev.Message,
		"source":             map[string]any{"component": ev.Source, "host": r.cfg.Host},
		"reportingComponent": ev.Source,
		"reportingInstance":  r.cfg.Host,
		"firstTimestamp":     ts,
		"lastTimestamp":      ts,
		"count":              int64(1),
		"type":               ev.Type,
		"severity":           string(ev.Severity),
		"eventTime":          nil,
	}
	key := cache.Key{Resource: Resource.Resource, Namespace: ns, Name: name}
	_, err := r.cfg.Store.Create(ctx, key, obj, cache.WriteOptions{})
	return key, err
}

// bumpLocked updates the aggregated Event e: count+1, lastTimestamp, the latest message.
func (r *Recorder) bumpLocked(ctx context.Context, e *entry, ev Event, now time.Time) error {
	cur, err := r.cfg.Store.Get(ctx, e.key)
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
	obj["count"] = count + 1
	obj["lastTimestamp"] = now.UTC().Format(time.RFC3339)
	obj["message"] = ev.Message
	obj["severity"] = string(ev.Severity)
	delete(obj["metadata"].(map[string]any), "resourceVersion")
	if _, err := r.cfg.Store.Update(ctx, e.key, obj, cache.WriteOptions{}); err != nil {
		return err
	}
	e.last = now
	return nil
}
