package faults

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/opemu/opemu/cache"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
)

// writeStatus keeps each Fault's status (injected, phase, lastInjectionTime) current until ctx
// is done. It runs beside the request path, never on it: injections only wake it, so any number
// of them between two writes become one write. It also wakes at the next expiry, on the clock.
func (e *Engine) writeStatus(ctx context.Context) {
	written := map[string]status{} // by uid: what this engine last wrote or saw stored
	for {
		now := e.cfg.Clock.Now()
		var next time.Time
		live := map[string]bool{}
		for _, r := range *e.rules.Load() {
			live[r.uid] = true
			st := r.statusAt(now)
			if st.Phase == PhaseActive && !r.expiry.IsZero() && (next.IsZero() || r.expiry.Before(next)) {
				next = r.expiry
			}
			prev, ok := written[r.uid]
			if !ok {
				prev = r.stored
			}
			if prev == st {
				continue
			}
			err := e.write(ctx, r, st)
			switch {
			case err == nil, errors.Is(err, cache.ErrNotFound), isConflict(err):
				// Written, or the Fault is gone or replaced: the watch brings what is next.
				written[r.uid] = st
			case ctx.Err() != nil:
				return
			default:
				// Tried again at the next wake.
				e.log.Warn("writing a Fault's status", "fault", r.name, "err", err)
			}
		}
		for uid := range written {
			if !live[uid] {
				delete(written, uid)
			}
		}
		var expiry <-chan time.Time
		var timer clock.Timer
		if !next.IsZero() {
			timer = e.cfg.Clock.NewTimer(next.Sub(now))
			expiry = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-e.wake:
		case <-expiry:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// statusAt is r's status at now, from its counter.
func (r *rule) statusAt(now time.Time) status {
	r.c.mu.Lock()
	injected, last := r.c.injected, r.c.last
	r.c.mu.Unlock()
	st := status{ObservedGeneration: r.generation, Injected: injected, Phase: r.phase(injected, now), Message: r.invalid}
	if !last.IsZero() {
		st.LastInjectionTime = last.UTC().Format(time.RFC3339)
	}
	return st
}

// write stores st as r's status through the status subresource, on the Fault r was made from
// (its uid is a precondition).
func (e *Engine) write(ctx context.Context, r *rule, st status) error {
	raw, err := json.Marshal(st)
	if err != nil {
		return err
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	obj := map[string]any{
		"apiVersion": Resource.Group + "/v1", "kind": "Fault",
		"metadata": map[string]any{"name": r.name, "uid": r.uid},
		"status":   m,
	}
	_, err = e.cfg.Client.UpdateStatus(ctx, r.key, obj)
	return err
}

func isConflict(err error) bool {
	return errors.Is(err, cache.ErrConflict) || apierrors.IsConflict(err)
}
