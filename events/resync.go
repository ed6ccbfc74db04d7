package events

import (
	"container/list"
	"context"
	"sort"
	"time"

	"github.com/opemu/opemu/cache"
)

// Resync forgets what the recorder knows of stored Events and counts every Event the store
// holds now against Limit, oldest lastTimestamp first, removing those beyond it: for a store
// whose content was replaced (a snapshot restored). Recording after it aggregates into none of
// the Events from before (a new Event is made instead).
func (r *Recorder) Resync(ctx context.Context) error {
	res, err := r.cfg.Client.List(ctx, Resource)
	if err != nil {
		return err
	}
	r.mu.Lock()
	r.index, r.order, r.byKey = map[aggKey]*entry{}, list.New(), map[cache.Key]*entry{}
	r.mu.Unlock()
	type stored struct {
		key  cache.Key
		last time.Time
	}
	all := make([]stored, 0, len(res.Items))
	for _, o := range res.Items {
		last, _ := time.Parse(time.RFC3339, lastSeen(o))
		all = append(all, stored{o.Key(), last})
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].last.Before(all[j].last) })
	for _, s := range all {
		evict, _ := r.Track(s.key, s.last)
		for _, k := range evict {
			_ = r.cfg.Client.RemoveEvent(ctx, k)
		}
	}
	return nil
}
