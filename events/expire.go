package events

import (
	"context"
	"time"

	"github.com/opemu/opemu/cache"
)

// Run removes Events not seen for TTL, every TTL/10 (at most a minute), until ctx is done: the
// expiry of a store that does not expire Events itself (the in-memory store; on etcd each
// Event's lease does, and Run is not needed).
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

// Sweep removes, once, every stored Event (also those clients created) last seen more than TTL
// ago. Run calls it periodically.
func (r *Recorder) Sweep(ctx context.Context) {
	res, err := r.cfg.Client.List(ctx, Resource)
	if err != nil {
		return
	}
	cutoff := r.cfg.Clock.Now().Add(-r.cfg.TTL)
	for _, o := range res.Items {
		if last, _ := time.Parse(time.RFC3339, lastSeen(o)); !last.IsZero() && last.Before(cutoff) {
			_ = r.cfg.Client.Expire(ctx, o.Key())
		}
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
