package events

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	"k8s.io/apimachinery/pkg/fields"
)

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
	res, err := r.cfg.Client.List(ctx, Resource, cache.InNamespace(q.Namespace), cache.MatchingFields(fields.SelectorFromSet(set)))
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
	res, err := r.cfg.Client.List(ctx, Resource)
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
