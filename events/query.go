package events

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	"k8s.io/apimachinery/pkg/fields"
)

// SelectableFields are the field-selector fields of an Event (beyond metadata.name and
// metadata.namespace), as kube-apiserver offers them: involvedObject.*, type, reason, source,
// plus lastTimestamp and severity for opemu's own queries. Wire it into cache.Config.
func SelectableFields(gr cache.GroupResource, obj map[string]any) fields.Set {
	if gr != Resource {
		return nil
	}
	io, _ := obj["involvedObject"].(map[string]any)
	src, _ := obj["source"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	return fields.Set{
		"involvedObject.kind":            str(io, "kind"),
		"involvedObject.namespace":       str(io, "namespace"),
		"involvedObject.name":            str(io, "name"),
		"involvedObject.uid":             str(io, "uid"),
		"involvedObject.apiVersion":      str(io, "apiVersion"),
		"involvedObject.resourceVersion": str(io, "resourceVersion"),
		"involvedObject.fieldPath":       str(io, "fieldPath"),
		"reason":                         str(obj, "reason"),
		"reportingComponent":             str(obj, "reportingComponent"),
		"source":                         str(src, "component"),
		"type":                           str(obj, "type"),
		"severity":                       str(obj, "severity"),
		"lastTimestamp":                  str(obj, "lastTimestamp"),
		"count":                          fmt.Sprint(obj["count"]),
	}
}

// Query filters Events for GET /events. Empty fields match everything.
type Query struct {
	Namespace, Name, Kind, Type, Severity, Reason string
	Since                                         time.Time
	// Limit keeps the newest Limit Events; zero means 100.
	Limit int
}

// Query returns the matching Events, oldest lastTimestamp first, as stored JSON.
func (r *Recorder) Query(ctx context.Context, q Query) ([]json.RawMessage, error) {
	set := fields.Set{}
	for k, v := range map[string]string{"involvedObject.name": q.Name, "involvedObject.kind": q.Kind, "type": q.Type, "severity": q.Severity, "reason": q.Reason} {
		if v != "" {
			set[k] = v
		}
	}
	res, err := r.cfg.Store.List(ctx, Resource, cache.InNamespace(q.Namespace), cache.MatchingFields(fields.SelectorFromSet(set)))
	if err != nil {
		return nil, err
	}
	items := res.Items
	if !q.Since.IsZero() {
		kept := items[:0:0]
		for _, o := range items {
			if t, err := time.Parse(time.RFC3339, o.Field("lastTimestamp")); err == nil && !t.Before(q.Since.Truncate(time.Second)) {
				kept = append(kept, o)
			}
		}
		items = kept
	}
	sortByLast(items)
	limit := q.Limit
	if limit <= 0 {
		limit = 100
	}
	if len(items) > limit {
		items = items[len(items)-limit:]
	}
	out := make([]json.RawMessage, len(items))
	for i, o := range items {
		out[i] = o.Raw()
	}
	return out, nil
}

// sortByLast orders Events by lastTimestamp, then by resourceVersion (write order).
func sortByLast(items []*cache.Object) {
	sort.SliceStable(items, func(i, j int) bool {
		a, b := items[i].Field("lastTimestamp"), items[j].Field("lastTimestamp")
		if a != b {
			return a < b
		}
		return items[i].ResourceVersion() < items[j].ResourceVersion()
	})
}

// Stats summarises the stored Events.
type Stats struct {
	Total      int            `json:"total"`
	LastHour   int            `json:"lastHour"`
	ByType     map[string]int `json:"byType"`
	BySeverity map[string]int `json:"bySeverity"`
	// Aggregated counts Events with count > 1.
	Aggregated int `json:"aggregated"`
}

// Stats counts the stored Events.
func (r *Recorder) Stats(ctx context.Context) (Stats, error) {
	res, err := r.cfg.Store.List(ctx, Resource)
	if err != nil {
		return Stats{}, err
	}
	st := Stats{ByType: map[string]int{}, BySeverity: map[string]int{}}
	hourAgo := r.cfg.Clock.Now().Add(-time.Hour)
	for _, o := range res.Items {
		f := o.Field
		st.Total++
		if t, err := time.Parse(time.RFC3339, f("lastTimestamp")); err == nil && !t.Before(hourAgo.Truncate(time.Second)) {
			st.LastHour++
		}
		if f("type") != "" {
			st.ByType[f("type")]++
		}
		if f("severity") != "" {
			st.BySeverity[f("severity")]++
		}
		if c, err := strconv.Atoi(f("count")); err == nil && c > 1 {
			st.Aggregated++
		}
	}
	return st, nil
}
