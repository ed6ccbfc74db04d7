package events

import (
	"context"
	"sort"
	"time"

	"github.com/opemu/opemu/cache"
)

// Run removes Events older than TTL and enforces Limit over every stored Event (also those
// clients created), every SweepInterval, until ctx is done.
func (r *Recorder) Run(ctx context.Context) error {
	interval := min(r.cfg.TTL/10, time.Minute)
	t := r.cfg.Clock.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
			r.Sweep(ctx)
		}
	}
}

// Sweep removes expired Events and, beyond Limit, the oldest ones. Run calls it periodically.
func (r *Recorder) Sweep(ctx context.Context) {
	res, err := r.cfg.Client.List(ctx, Resource)
	if err != nil {
		return
	}
	type aged struct {
		key  cache.Key
		last time.Time
		rv   uint64
	}
	cutoff := r.cfg.Clock.Now().Add(-r.cfg.TTL)
	var keep []aged
	var drop []cache.Key
	for _, o := range res.Items {
		last, _ := time.Parse(time.RFC3339, lastSeen(o))
		if !last.IsZero() && last.Before(cutoff) {
			drop = append(drop, o.Key())
			continue
		}
		keep = append(keep, aged{o.Key(), last, o.ResourceVersion()})
	}
	if over := len(keep) - r.cfg.Limit; over > 0 {
		sort.Slice(keep, func(i, j int) bool {
			if !keep[i].last.Equal(keep[j].last) {
				return keep[i].last.Before(keep[j].last)
			}
			return keep[i].rv < keep[j].rv
		})
		for _, a := range keep[:over] {
			drop = append(drop, a.key)
		}
	}
	for _, k := range drop {
		_ = r.cfg.Client.RemoveEvent(ctx, k)
		r.mu.Lock()
		if e, ok := r.byKey[k]; ok {
			r.forgetLocked(e)
		}
		r.mu.Unlock()
	}
}

// lastSeen is when the Event o was last seen: its lastTimestamp, or for an Event written through
// events.k8s.io (which has none) its series' last observation or its eventTime.
func lastSeen(o *cache.Object) string {
	for _, f := range []string{"lastTimestamp", "series.lastObservedTime", "eventTime"} {
		if v := o.Field(f); v != "" {
			return v
		}
	}
	return ""
}
